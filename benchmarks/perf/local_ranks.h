// Ranks that coil_perf (and gloo_perf) fork on this host when no launcher
// started them.
//
// The parent process is rank 0 and forks ranks 1..n-1 before it starts any
// thread; rank 0 then creates what the ranks must share (coil's unique id)
// and hands it to each child over a pipe. The forking, the death signal,
// the pipes and the reaping are launch/forked_ranks.h's.
//
// Failure handling, so that a broken run never hangs the parent:
//  - a watcher thread in the parent reaps children as they exit; if one
//    fails while rank 0 is still running, the library is expected to report
//    the lost peer on rank 0. If rank 0 is still busy `kGraceAfterChildFailure`
//    later, the watcher kills the other children and exits the process
//    with status 1, saying so;
//  - at the end, the parent waits for the children with a deadline, kills
//    stragglers, and folds their exit status into its own.
#pragma once

#include <atomic>
#include <cstddef>
#include <chrono>
#include <thread>
#include <vector>

#include "launch/forked_ranks.h"

namespace coil_perf {

class LocalRanks {
 public:
  static constexpr std::chrono::seconds kGraceAfterChildFailure{20};
  static constexpr std::chrono::seconds kExitDeadline{60};

  /// Forks nranks-1 children. Returns in every process; rank() tells which
  /// one this is. Throws std::system_error if fork or pipe fail.
  explicit LocalRanks(int nranks);
  /// Parent: stops the watcher and kills any child still alive.
  ~LocalRanks();
  LocalRanks(const LocalRanks&) = delete;
  LocalRanks& operator=(const LocalRanks&) = delete;

  int rank() const { return forked_.isChild() ? forked_.rank() : 0; }
  int nranks() const { return nranks_; }

  /// Parent only: writes `bytes` bytes at `data` to every child's pipe
  /// (bytes may be 0), closes the pipes and starts the watcher.
  void share(const void* data, size_t bytes);
  /// Parent only: closes the pipes without an id (the children then exit 1)
  /// and starts the watcher, so that the children are reaped.
  void abandon();
  /// Child only: reads the `bytes` bytes rank 0 shares into `data`; throws
  /// std::runtime_error if the parent closed the pipe first or sent nothing
  /// within 60 s.
  void receive(void* data, size_t bytes);

  /// Parent: stops the watcher and waits for every child (kExitDeadline,
  /// a few seconds when `selfFailed`), killing the ones that overstay.
  /// Returns true if every child exited with status 0 (and printed why
  /// not otherwise). Child: returns true at once.
  bool waitForChildren(bool selfFailed);

 private:
  void startWatcher();
  /// Joins the watcher: from then on only the main thread touches forked_.
  void stopWatcher();
  void watch();
  /// Prints how each of `reaped` that failed ended; returns how many failed.
  static int reportFailures(const std::vector<coil::ForkedRank>& reaped);

  int nranks_ = 1;
  coil::ForkedRanks forked_;
  std::atomic<bool> mainDone_{false};
  std::thread watcher_;
};

}  // namespace coil_perf
