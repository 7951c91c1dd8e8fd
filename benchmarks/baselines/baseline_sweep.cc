#include "baseline_sweep.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "check.h"
#include "dtypes.h"
#include "json.h"
#include "report.h"
#include "units.h"

namespace coil_perf {
namespace {

void printUsage(const char* program, const BaselineTool& tool) {
  std::printf(
      "usage: %s [flags]     %s\n"
      "  -b SIZE   smallest message (default 8); K/M/G suffixes\n"
      "  -e SIZE   largest message (default 64M)\n"
      "  -f X      size factor per step (default 2)\n"
      "  -i SIZE   size increment per step instead of -f\n"
      "  -n N      timed iterations (default 20)\n"
      "  -w N      warmup iterations (default 5)\n"
      "  -c 0|1    check results (default 1)\n"
      "  -P N      processes (ranks) to fork (default 2; coil_perf's -P)\n"
      "%s"
      "  --json FILE                  also write the rows as JSON\n",
      program, tool.description.c_str(), tool.extraUsage.c_str());
}

void parseArgs(int argc, char** argv, BaselineOptions& o, const BaselineTool& tool) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      printUsage(argv[0], tool);
      std::exit(0);
    }
    if (i + 1 >= argc) throw UsageError("'" + flag + "' needs a value (or is unknown)");
    const std::string v = argv[++i];
    if (flag == "-b") o.minBytes = parseBytes(v, "-b");
    else if (flag == "-e") o.maxBytes = parseBytes(v, "-e");
    else if (flag == "-f") {
      char* end = nullptr;
      o.factor = std::strtod(v.c_str(), &end);
      if (*end != '\0' || !(o.factor > 1.0)) throw UsageError("-f: '" + v + "' must be > 1");
    } else if (flag == "-i") o.stepBytes = parseBytes(v, "-i");
    else if (flag == "-n") o.iters = static_cast<int>(parseInteger(v, "-n", 1, 1000000000));
    else if (flag == "-w") o.warmup = static_cast<int>(parseInteger(v, "-w", 0, 1000000000));
    else if (flag == "-c") o.check = parseInteger(v, "-c", 0, 1) == 1;
    else if (flag == "-P") o.nranks = static_cast<int>(parseInteger(v, "-P", 1, 256));
    else if (flag == "--json") o.jsonPath = v;
    else if (!tool.takeFlag || !tool.takeFlag(flag, v)) throw UsageError("unknown argument '" + flag + "'");
  }
  sweepSizes(o.minBytes, o.maxBytes, o.factor, o.stepBytes);  // validates
}

/// Each rank's "pid N on host", gathered through the library itself.
std::vector<std::string> gatherText(BaselineRank& lib, int rank, int nranks, const std::string& text) {
  constexpr size_t kSlot = 64;
  std::vector<uint8_t> table(kSlot * nranks, 0);
  std::memcpy(&table[kSlot * rank], text.data(), std::min(text.size(), kSlot - 1));
  lib.sumBytesOverRanks(table.data(), table.size());
  std::vector<std::string> out;
  for (int r = 0; r < nranks; ++r) {
    const char* slot = reinterpret_cast<const char*>(&table[kSlot * r]);
    out.emplace_back(slot, strnlen(slot, kSlot));
  }
  return out;
}

/// Times and checks one (size, placement).
class Sweep {
 public:
  Sweep(const BaselineOptions& o, const std::string& tool, BaselineRank& lib, int rank, int nranks)
      : o_(o), tool_(tool), lib_(lib), rank_(rank), nranks_(nranks), type_(typeInfo(coilFloat32)),
        send_(o.maxBytes / sizeof(float) + 1), recv_(o.maxBytes / sizeof(float) + 1) {}

  /// A few untimed calls at the largest size before the first row, as
  /// coil_perf and nccl-tests do.
  void warmUp(size_t bytes) {
    const size_t count = bytes / sizeof(float);
    fillInput(send_.data(), count, type_, coilSum, rank_, nranks_);
    lib_.prepare(send_.data(), recv_.data(), count);
    for (int i = 0; i < o_.warmup; ++i) lib_.allreduceFloatSum(send_.data(), recv_.data(), count);
  }

  Row measure(size_t bytes) {
    Row row;
    row.count = bytes / sizeof(float);
    row.bytes = row.count * sizeof(float);
    row.type = "float";
    row.op = "sum";
    row.outOfPlace = timeAndCheck(row.count, false);
    row.inPlace = timeAndCheck(row.count, true);
    return row;
  }

 private:
  Measure timeAndCheck(size_t count, bool inPlace) {
    float* recv = recv_.data();
    float* in = inPlace ? recv : send_.data();
    fillInput(in, count, type_, coilSum, rank_, nranks_);
    lib_.prepare(in, recv, count);
    for (int i = 0; i < o_.warmup; ++i) lib_.allreduceFloatSum(in, recv, count);
    lib_.maxOverRanks(0.0);  // barrier
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) lib_.allreduceFloatSum(in, recv, count);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    Measure m = bandwidth(count * sizeof(float), lib_.maxOverRanks(elapsed.count() / o_.iters), nranks_);
    if (o_.check) {
      if (!inPlace) poison(recv, count, type_);
      fillInput(in, count, type_, coilSum, rank_, nranks_);
      lib_.allreduceFloatSum(in, recv, count);
      const WrongReport w = countWrong(recv, count, type_, coilSum, nranks_);
      if (w.count > 0) {
        std::fprintf(stderr, "%s: rank %d: %zu B %s: %zu wrong; first at %zu\n", tool_.c_str(), rank_,
                     count * sizeof(float), inPlace ? "in-place" : "out-of-place", w.count, w.firstIndex);
      }
      m.wrong = static_cast<long long>(lib_.sumOverRanks(w.count));
    }
    return m;
  }

  const BaselineOptions& o_;
  const std::string& tool_;
  BaselineRank& lib_;
  int rank_, nranks_;
  const TypeInfo& type_;
  std::vector<float> send_, recv_;
};

}  // namespace

int runBaseline(int argc, char** argv, BaselineOptions& o, const BaselineTool& tool) {
  const char* name = tool.name.c_str();
  try {
    parseArgs(argc, argv, o, tool);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s (try -h)\n", name, e.what());
    return 2;
  }
  std::unique_ptr<LocalRanks> ranks;
  try {
    ranks = std::make_unique<LocalRanks>(o.nranks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
  const int rank = ranks->rank();
  RunInfo info;
  info.tool = tool.name;
  info.nranks = o.nranks;
  info.launcher = "fork";
  info.minBytes = o.minBytes;
  info.maxBytes = o.maxBytes;
  info.factor = o.factor;
  info.stepBytes = o.stepBytes;
  info.warmup = o.warmup;
  info.iters = o.iters;
  info.check = o.check;

  std::vector<Row> rows;
  RunSummary summary;
  try {
    std::unique_ptr<BaselineRank> lib = tool.connect(*ranks, rank, o.nranks);
    info.transport = lib->transportName();
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    info.ranks = gatherText(*lib, rank, o.nranks, "pid " + std::to_string(getpid()) + " on " + host);
    Table table(stdout, info);
    if (rank == 0) table.printHeader();
    Sweep sweep(o, tool.name, *lib, rank, o.nranks);
    long long wrong = 0;
    const std::vector<size_t> sizes = sweepSizes(o.minBytes, o.maxBytes, o.factor, o.stepBytes);
    sweep.warmUp(sizes.back());
    for (size_t bytes : sizes) {
      rows.push_back(sweep.measure(bytes));
      wrong += std::max(0LL, rows.back().outOfPlace.wrong) + std::max(0LL, rows.back().inPlace.wrong);
      if (rank == 0) table.printRow(rows.back());
    }
    summary.wrongTotal = o.check ? wrong : -1;
    summary.avgBusbw = averageBusbw(rows);
    if (rank == 0) table.printFooter(summary.wrongTotal, summary.avgBusbw);
    summary.ok = wrong == 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: %s\n", name, rank, e.what());
    summary.ok = false;
    summary.error = e.what();
  }
  if (!ranks->waitForChildren(!summary.ok)) {
    if (summary.ok) summary.error = "another rank failed";
    summary.ok = false;
  }
  if (rank == 0 && tool.cleanUp) tool.cleanUp();
  if (rank == 0 && !o.jsonPath.empty()) {
    try {
      writeJson(o.jsonPath, info, rows, summary);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", name, e.what());
      summary.ok = false;
    }
  }
  return summary.ok ? 0 : 1;
}

}  // namespace coil_perf
