// Ranks as forked processes of this host: the mechanics that the test
// harnesses (tests/harness/run_ranks, tests/transport/rank_harness) and
// coil_perf/gloo_perf (benchmarks/perf/local_ranks) share.
//
//  - Fork before any thread: construct ForkedRanks before the process starts
//    a thread (coil's rendezvous root is one). A fork copies other threads'
//    locks but not the threads, and the C library and a sanitizer's
//    allocator are not all fork-safe with threads running. Where threads
//    run anyway (a test's leftovers), each fork waits, up to a second in
//    all, until they sleep (quiet_threads.h).
//  - What the ranks must share (a unique id) is therefore made after the
//    fork, and handed to each child over its own pipe.
//  - Children get SIGKILL when the parent dies (PR_SET_PDEATHSIG; strictly,
//    when the thread that forked them ends), so a crashed or killed parent
//    leaves no rank behind.
//  - The parent reaps children as they exit, waits for them with a
//    deadline, kills the ones that overstay, and says in words how each
//    one ended.
//
//   ForkedRanks forked(0, n);
//   if (forked.isChild()) { forked.receive(&id, sizeof id); ...; ForkedRanks::exitChild(code); }
//   forked.share(&id, sizeof id);
//   forked.reapAll(deadline);
//   for (const ForkedRank& c : forked.children()) if (!c.succeeded()) report(c.describe());
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace coil {

/// One child, as the parent sees it.
struct ForkedRank {
  int rank = 0;
  pid_t pid = -1;
  bool reaped = false;
  int status = 0;           // waitpid status, once reaped
  bool overstayed = false;  // killed by reapAll at its deadline

  /// Exited with status 0.
  bool succeeded() const;
  /// How it ended: "rank 2 (pid 1234) exited with status 1", "... was
  /// killed by signal 9 (Killed)", "... did not exit by its deadline (killed)".
  std::string describe() const;
};

class ForkedRanks {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Handover { Received, ParentClosed, TimedOut };

  /// Forks one child per rank in [firstRank, endRank). Returns in every
  /// process; isChild() tells which one this is. Throws std::system_error
  /// if pipe or fork fail (after killing the children already forked).
  ForkedRanks(int firstRank, int endRank);
  /// Parent: kills and reaps the children still running.
  ~ForkedRanks();
  ForkedRanks(const ForkedRanks&) = delete;
  ForkedRanks& operator=(const ForkedRanks&) = delete;

  bool isChild() const { return rank_ >= 0; }
  /// This child's rank; -1 in the parent.
  int rank() const { return rank_; }

  // ---- parent --------------------------------------------------------------
  // Not thread-safe: one thread at a time calls these.
  /// Writes `bytes` bytes at `data` (bytes may be 0) to every child and
  /// closes the pipes. A child that died first is skipped (no SIGPIPE):
  /// its reaping reports it.
  void share(const void* data, size_t bytes);
  /// Closes the pipes without data: the children's receive() returns
  /// ParentClosed.
  void abandon();
  /// Reaps the children that have exited, without blocking; returns them.
  std::vector<ForkedRank> reapExited();
  /// Reaps until every child has exited or `deadline` passes, then kills
  /// the rest (overstayed). Returns the children this call reaped.
  std::vector<ForkedRank> reapAll(Clock::time_point deadline);
  /// SIGKILLs and reaps every child still running.
  void killRemaining();
  const std::vector<ForkedRank>& children() const { return children_; }
  std::vector<pid_t> pids() const;
  bool allSucceeded() const;

  // ---- child ---------------------------------------------------------------
  /// Reads the `bytes` bytes that the parent shares into `data`.
  Handover receive(void* data, size_t bytes,
                   std::chrono::milliseconds timeout = std::chrono::seconds(60));
  /// Flushes stdio and ends this process at once: the atexit work of the
  /// parent's copy (gtest's, the program's) must not run in a child.
  [[noreturn]] static void exitChild(int status);

 private:
  void closePipes();

  int rank_ = -1;
  int childPipe_ = -1;        // child: read end
  std::vector<int> pipes_;    // parent: write end per child
  std::vector<ForkedRank> children_;
};

}  // namespace coil
