// The progress line of a long sweep: "[ 37/120 rows, 1m12s] allreduce
// float sum 1048576 B" on stderr, redrawn in place. Only on a terminal: a
// log file or a pipe gets the table alone, and the row count up front
// (Sweep) says how long the run is either way.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

namespace coil_perf {

class Progress {
 public:
  /// Draws on `out` only when `enabled` (the caller prints the table, and
  /// `out` is a terminal: see onTerminal()).
  Progress(std::FILE* out, size_t totalRows, bool enabled);
  ~Progress() { clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// Row `done` + 1 of the total is being measured; `what` names it.
  void show(size_t done, const std::string& what);
  /// Erases the line, so that a table row printed next starts clean.
  void clear();

  /// True when `f` is a terminal.
  static bool onTerminal(std::FILE* f);

 private:
  std::FILE* out_;
  size_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

/// "1m12s", "3h04m", "9s": elapsed time for the progress line.
std::string shortDuration(double seconds);

}  // namespace coil_perf
