#include "report.h"


namespace coil_perf {
namespace {

template <typename... Args>
std::string format(const char* fmt, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

}  // namespace

Measure bandwidthWithFactor(size_t bytes, double seconds, double busFactor) {
  Measure m;
  m.timeUs = seconds * 1e6;
  if (seconds > 0) {
    m.algbw = static_cast<double>(bytes) / seconds / 1e9;
    m.busbw = m.algbw * busFactor;
  }
  return m;
}

Measure bandwidth(size_t bytes, double seconds, int nranks) {
  // Ring all-reduce moves 2(n-1)/n of the buffer through every link: the
  // factor that makes busbw comparable across rank counts (nccl-tests).
  return bandwidthWithFactor(bytes, seconds, nranks > 1 ? 2.0 * (nranks - 1) / nranks : 0.0);
}

double averageBusbw(const std::vector<Row>& rows) {
  double sum = 0;
  size_t cells = 0;
  for (const Row& r : rows) {
    sum += r.outOfPlace.busbw;
    ++cells;
    if (r.hasInPlace) {
      sum += r.inPlace.busbw;
      ++cells;
    }
  }
  return cells == 0 ? 0 : sum / static_cast<double>(cells);
}

Table::Table(std::FILE* out, const RunInfo& info) : out_(out), info_(info) {}

void Table::printHeader() const {
  printRunInfo();
  printColumns(false, "");
}

void Table::printRunInfo() const {
  std::FILE* f = out_;
  std::fprintf(f, "# %s: nranks %d, transport %s, launcher %s\n", info_.tool.c_str(), info_.nranks,
               info_.transport.c_str(), info_.launcher.c_str());
  if (info_.stepBytes > 0) {
    std::fprintf(f, "# minBytes %zu maxBytes %zu step: %zu(bytes) warmup iters: %d iters: %d validation: %d\n",
                 info_.minBytes, info_.maxBytes, info_.stepBytes, info_.warmup, info_.iters, info_.check ? 1 : 0);
  } else {
    std::fprintf(f, "# minBytes %zu maxBytes %zu step: %g(factor) warmup iters: %d iters: %d validation: %d\n",
                 info_.minBytes, info_.maxBytes, info_.factor, info_.warmup, info_.iters, info_.check ? 1 : 0);
  }
  std::fprintf(f, "#\n# Using ranks\n");
  for (size_t r = 0; r < info_.ranks.size(); ++r) {
    std::fprintf(f, "#  Rank %2zu %s\n", r, info_.ranks[r].c_str());
  }
  std::fprintf(f, "#\n");
  std::fflush(f);
}

void Table::printNote(const std::string& text) const {
  std::fprintf(out_, "# %s\n", text.c_str());
  std::fflush(out_);
}

void Table::printColumns(bool rooted, const std::string& title) const {
  std::FILE* f = out_;
  if (!title.empty()) std::fprintf(f, "# Collective: %s\n#\n", title.c_str());
  const bool base = !info_.baselineName.empty();
  const std::string b = info_.baselineName;
  // Same widths as printRow: 42 columns of row labels (47 with the root),
  // then blocks of 34.
  std::string groups = format(rooted ? "# %45s %-34s %-34s" : "# %40s %-34s %-34s", "",
                              "out-of-place", "in-place");
  if (base) groups += format(" %s", (b + " (out-of-place)").c_str());
  std::string names = format("# %10s %13s %8s %6s", "size", "count", "type", "redop");
  std::string units = format("# %10s %13s %8s %6s", "(B)", "(elements)", "", "");
  if (rooted) {
    names += format(" %4s", "root");
    units += format(" %4s", "");
  }
  names += format(" %9s %7s %7s %7s  %9s %7s %7s %7s", "time", "algbw", "busbw", "#wrong", "time",
                  "algbw", "busbw", "#wrong");
  units += format(" %9s %7s %7s %7s  %9s %7s %7s %7s", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                  "(GB/s)", "(GB/s)", "");
  if (base) {
    names += format("  %9s %7s %8s", "time", "busbw", ("coil/" + b).c_str());
    units += format("  %9s %7s %8s", "(us)", "(GB/s)", "");
  }
  for (const std::string& line : {groups, names, units}) {
    std::fprintf(f, "%s\n", line.substr(0, line.find_last_not_of(' ') + 1).c_str());
  }
  std::fflush(f);
}

namespace {
std::string wrongText(long long wrong) { return wrong < 0 ? "N/A" : std::to_string(wrong); }
}  // namespace

void Table::printRow(const Row& row) const {
  std::FILE* f = out_;
  const Measure& o = row.outOfPlace;
  const Measure& i = row.inPlace;
  std::fprintf(f, "  %10zu %13zu %8s %6s", row.bytes, row.count, row.type.c_str(), row.op.c_str());
  if (row.root >= 0) std::fprintf(f, " %4d", row.root);
  std::fprintf(f, " %9.2f %7.2f %7.2f %7s", o.timeUs, o.algbw, o.busbw, wrongText(o.wrong).c_str());
  if (row.hasInPlace) {
    std::fprintf(f, "  %9.2f %7.2f %7.2f %7s", i.timeUs, i.algbw, i.busbw, wrongText(i.wrong).c_str());
  } else {
    std::fprintf(f, "  %9s %7s %7s %7s", "n/a", "n/a", "n/a", "n/a");
  }
  if (!info_.baselineName.empty()) {
    if (row.baseline.measured) {
      std::fprintf(f, "  %9.2f %7.2f %8.2f", row.baseline.timeUs, row.baseline.busbw, row.baseline.ratio);
    } else {
      std::fprintf(f, "  %9s %7s %8s  (%s)", "n/a", "n/a", "n/a", row.baseline.note.c_str());
    }
  }
  std::fprintf(f, "\n");
  std::fflush(f);
}

void Table::printFooter(long long wrongTotal, double avgBusbw) const {
  std::fprintf(out_, "# Out of bounds values : %s %s\n", wrongText(wrongTotal).c_str(),
               wrongTotal <= 0 ? "OK" : "FAILED");
  std::fprintf(out_, "# Avg bus bandwidth    : %g\n#\n", avgBusbw);
  std::fflush(out_);
}

}  // namespace coil_perf
