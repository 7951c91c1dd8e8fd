// gloo_perf: the coil_perf sweep (float, sum) over Gloo, as a baseline.
//
// Ranks are forked here (rank 0 is the parent), meet through a
// gloo::rendezvous::FileStore in a fresh temporary directory, and talk over
// Gloo's TCP transport on 127.0.0.1. Two algorithms:
//   --algo ring (default)  gloo::allreduce() with Algorithm::RING: the
//                          reduce-scatter + all-gather ring that PyTorch's
//                          Gloo backend calls for CPU tensors; supports
//                          separate input and output buffers.
//   --algo allreduce_ring  the older gloo::AllreduceRing class: in-place
//                          only, passes whole buffers around the ring. Its
//                          out-of-place column copies the input into the
//                          output first, inside the timed loop.
// Output columns, JSON and result checking are the same as coil_perf's.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/allreduce_ring.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "check.h"
#include "dtypes.h"
#include "json.h"
#include "local_ranks.h"
#include "report.h"
#include "units.h"

using namespace coil_perf;

namespace {

struct GlooOptions {
  size_t minBytes = 8;
  size_t maxBytes = size_t{64} << 20;
  double factor = 2.0;
  size_t stepBytes = 0;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  int nranks = 2;
  bool legacyRing = false;  // --algo allreduce_ring
  std::string jsonPath;
};

void printUsage(const char* program) {
  std::printf(
      "usage: %s [flags]     float sum all-reduce sweep over Gloo (TCP, 127.0.0.1)\n"
      "  -b SIZE   smallest message (default 8); K/M/G suffixes\n"
      "  -e SIZE   largest message (default 64M)\n"
      "  -f X      size factor per step (default 2)\n"
      "  -i SIZE   size increment per step instead of -f\n"
      "  -n N      timed iterations (default 20)\n"
      "  -w N      warmup iterations (default 5)\n"
      "  -c 0|1    check results (default 1)\n"
      "  -P N      processes (ranks) to fork (default 2; coil_perf's -P)\n"
      "  --algo ring|allreduce_ring   gloo::allreduce RING (default) or gloo::AllreduceRing\n"
      "  --json FILE                  also write the rows as JSON\n",
      program);
}

GlooOptions parseArgs(int argc, char** argv) {
  GlooOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      printUsage(argv[0]);
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
    else if (flag == "--algo") {
      if (v != "ring" && v != "allreduce_ring") throw UsageError("--algo: '" + v + "' is not ring or allreduce_ring");
      o.legacyRing = v == "allreduce_ring";
    } else {
      throw UsageError("unknown argument '" + flag + "'");
    }
  }
  sweepSizes(o.minBytes, o.maxBytes, o.factor, o.stepBytes);  // validates
  return o;
}

/// One rank's Gloo context and the few collectives the harness needs.
class GlooRank {
 public:
  GlooRank(int rank, int nranks, const std::string& storeDir) {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";  // loopback only
    attr.ai_family = AF_INET;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    context->setTimeout(std::chrono::seconds(60));
    gloo::rendezvous::FileStore store(storeDir);
    context->connectFullMesh(store, device);
    context_ = context;
  }

  const std::shared_ptr<gloo::Context>& context() const { return context_; }

  /// out = sum over ranks of in (RING). in may equal out (in-place).
  template <typename T>
  void allreduce(const T* in, T* out, size_t count,
                 void (*fn)(void*, const void*, const void*, size_t)) {
    gloo::AllreduceOptions opts(context_);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    if (in != out) opts.setInput(const_cast<T*>(in), count);
    opts.setOutput(out, count);
    opts.setReduceFunction(fn);
    opts.setTag(tag_++);
    gloo::allreduce(opts);
  }

  double maxOverRanks(double value) {
    double out = value;
    allreduce<double>(&out, &out, 1, &gloo::max<double>);
    return out;
  }
  uint64_t sumOverRanks(uint64_t value) {
    uint64_t out = value;
    allreduce<uint64_t>(&out, &out, 1, &gloo::sum<uint64_t>);
    return out;
  }
  std::vector<std::string> gatherText(int rank, int nranks, const std::string& text) {
    constexpr size_t kSlot = 64;
    std::vector<uint8_t> table(kSlot * nranks, 0);
    std::memcpy(&table[kSlot * rank], text.data(), std::min(text.size(), kSlot - 1));
    allreduce<uint8_t>(table.data(), table.data(), table.size(), &gloo::sum<uint8_t>);
    std::vector<std::string> out;
    for (int r = 0; r < nranks; ++r) {
      const char* slot = reinterpret_cast<const char*>(&table[kSlot * r]);
      out.emplace_back(slot, strnlen(slot, kSlot));
    }
    return out;
  }

 private:
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;
};

/// Times and checks one (size, placement) for the chosen algorithm.
class GlooSweep {
 public:
  GlooSweep(const GlooOptions& o, GlooRank& g, int rank, int nranks)
      : o_(o), g_(g), rank_(rank), nranks_(nranks), type_(typeInfo(coilFloat32)),
        send_(o.maxBytes / sizeof(float) + 1), recv_(o.maxBytes / sizeof(float) + 1) {}

  /// A few untimed calls at the largest size before the first row, as
  /// coil_perf and nccl-tests do.
  void warmUp(size_t bytes) {
    const size_t count = bytes / sizeof(float);
    fillInput(send_.data(), count, type_, coilSum, rank_, nranks_);
    for (int i = 0; i < o_.warmup; ++i) g_.allreduce<float>(send_.data(), recv_.data(), count, &gloo::sum<float>);
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
    float* send = send_.data();
    float* recv = recv_.data();
    float* in = inPlace ? recv : send;
    fillInput(in, count, type_, coilSum, rank_, nranks_);
    std::unique_ptr<gloo::AllreduceRing<float>> legacy;
    if (o_.legacyRing) legacy = std::make_unique<gloo::AllreduceRing<float>>(g_.context(), std::vector<float*>{recv}, static_cast<int>(count));
    auto call = [&] {
      if (legacy) {
        if (!inPlace) std::memcpy(recv, send, count * sizeof(float));
        legacy->run();
      } else {
        g_.allreduce<float>(in, recv, count, &gloo::sum<float>);
      }
    };
    for (int i = 0; i < o_.warmup; ++i) call();
    g_.maxOverRanks(0.0);  // barrier
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) call();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    Measure m = bandwidth(count * sizeof(float), g_.maxOverRanks(elapsed.count() / o_.iters), nranks_);
    if (o_.check) {
      if (!inPlace) poison(recv, count, type_);
      fillInput(in, count, type_, coilSum, rank_, nranks_);
      call();
      const WrongReport w = countWrong(recv, count, type_, coilSum, nranks_);
      if (w.count > 0) {
        std::fprintf(stderr, "gloo_perf: rank %d: %zu B %s: %zu wrong; first at %zu\n", rank_,
                     count * sizeof(float), inPlace ? "in-place" : "out-of-place", w.count, w.firstIndex);
      }
      m.wrong = static_cast<long long>(g_.sumOverRanks(w.count));
    }
    return m;
  }

  const GlooOptions& o_;
  GlooRank& g_;
  int rank_, nranks_;
  const TypeInfo& type_;
  std::vector<float> send_, recv_;
};

}  // namespace

int main(int argc, char** argv) {
  GlooOptions o;
  try {
    o = parseArgs(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gloo_perf: %s (try -h)\n", e.what());
    return 2;
  }
  char dirTemplate[] = "/tmp/gloo_perf.XXXXXX";
  if (mkdtemp(dirTemplate) == nullptr) {
    std::perror("gloo_perf: mkdtemp");
    return 1;
  }
  const std::string storeDir = dirTemplate;

  std::unique_ptr<LocalRanks> ranks;
  try {
    ranks = std::make_unique<LocalRanks>(o.nranks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_perf: %s\n", e.what());
    return 1;
  }
  const int rank = ranks->rank();
  RunInfo info;
  info.tool = "gloo_perf";
  info.nranks = o.nranks;
  info.transport = o.legacyRing ? "gloo-tcp (AllreduceRing)" : "gloo-tcp (allreduce RING)";
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
    // Nothing to hand over: the store directory was made before the fork.
    if (rank == 0) ranks->share(nullptr, 0);
    GlooRank gloo(rank, o.nranks, storeDir);
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    info.ranks = gloo.gatherText(rank, o.nranks, "pid " + std::to_string(getpid()) + " on " + host);
    Table table(stdout, info);
    if (rank == 0) table.printHeader();
    GlooSweep sweep(o, gloo, rank, o.nranks);
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
    std::fprintf(stderr, "gloo_perf: rank %d: %s\n", rank, e.what());
    summary.ok = false;
    summary.error = e.what();
  }
  if (!ranks->waitForChildren(!summary.ok)) {
    if (summary.ok) summary.error = "another rank failed";
    summary.ok = false;
  }
  if (rank == 0) {
    std::error_code ignored;
    std::filesystem::remove_all(storeDir, ignored);
    if (!o.jsonPath.empty()) {
      try {
        writeJson(o.jsonPath, info, rows, summary);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gloo_perf: %s\n", e.what());
        summary.ok = false;
      }
    }
  }
  return summary.ok ? 0 : 1;
}
