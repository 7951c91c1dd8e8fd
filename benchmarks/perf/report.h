// The nccl-tests-shaped table: a header describing the run, one line per
// (type, op, size) printed as soon as it is measured, and a footer with the
// average bus bandwidth and the number of wrong values. Shared by coil_perf
// and the baselines, so their outputs read (and parse) the same way.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace coil_perf {

/// One timed variant (out-of-place or in-place) of one row.
struct Measure {
  double timeUs = 0;   ///< per-rank mean time per call, combined over ranks (coil_perf -a)
  double algbw = 0;    ///< bytes / time, GB/s (1e9)
  double busbw = 0;    ///< algbw * 2(n-1)/n
  long long wrong = -1;  ///< mismatching elements summed over ranks; -1 = not checked
};

/// The reference library's columns of a row (--baseline).
struct BaselineCell {
  bool measured = false;
  double timeUs = 0;
  double busbw = 0;
  double ratio = 0;   ///< out-of-place busbw of the library under test / baseline busbw
  std::string note;   ///< why it was not measured
};

struct Row {
  std::string collective = "allreduce";
  size_t bytes = 0;
  size_t count = 0;
  std::string type;
  std::string op;   ///< "none" for collectives that do not reduce
  int root = -1;    ///< -1 for collectives without a root
  Measure outOfPlace;
  Measure inPlace;
  bool hasInPlace = true;  ///< false: the in-place columns read n/a
  BaselineCell baseline;
};

/// What the header says about the run.
struct RunInfo {
  std::string tool;       ///< "coil_perf", "gloo_perf"
  int nranks = 0;
  std::string transport;  ///< "shm", "tcp", "auto", ...
  std::string launcher;   ///< "fork", "mpirun", ...
  size_t minBytes = 0, maxBytes = 0;
  double factor = 0;
  size_t stepBytes = 0;
  int warmup = 0, iters = 0;
  bool check = true;
  std::string baselineName;  ///< "" = no baseline columns; else e.g. "mpi"
  std::string memory;        ///< "host" or "device" (coil_perf); "" = not said
  std::vector<std::string> ranks;  ///< "pid 123 on host" per rank
  std::vector<std::string> collectives;  ///< in run order; empty = all-reduce only
};

/// algbw and busbw (GB/s) of an all-reduce of `bytes` taking `seconds`.
Measure bandwidth(size_t bytes, double seconds, int nranks);
/// algbw and busbw = algbw * busFactor of an operation of `bytes` taking `seconds`.
Measure bandwidthWithFactor(size_t bytes, double seconds, double busFactor);

class Table {
 public:
  /// Prints to `out`, flushing after every line.
  Table(std::FILE* out, const RunInfo& info);
  /// printRunInfo, then printColumns for an untitled all-reduce block.
  void printHeader() const;
  /// The run's description: ranks, transport, sizes.
  void printRunInfo() const;
  /// The column titles of a block of rows; `rooted` adds the root column,
  /// `title` (if not empty) precedes them as "# Collective: <title>".
  void printColumns(bool rooted, const std::string& title) const;
  void printRow(const Row& row) const;
  /// "# <text>": a comment line among the rows.
  void printNote(const std::string& text) const;
  /// The footer; `avgBusbw` averages out-of-place and in-place busbw over
  /// all rows; `wrongTotal` < 0 means results were not checked.
  void printFooter(long long wrongTotal, double avgBusbw) const;

 private:
  std::FILE* out_;
  RunInfo info_;
};

/// Mean of the out-of-place and in-place busbw of every row (0 if none);
/// rows without an in-place form count their out-of-place busbw only.
double averageBusbw(const std::vector<Row>& rows);

}  // namespace coil_perf
