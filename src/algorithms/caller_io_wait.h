// Waiting on caller-driven paths (transport::CallerIo), for the algorithms
// that drive them: the FIFO one-shot (fifo_oneshot.cc) and the caller-path
// executor (caller_path_executor.h).
//
// The calling thread is the only one moving these bytes, so a wait is a
// loop: advance every path that has something pending until the condition
// holds; when nothing moved, poll for up to spinUs (pausing, or yielding),
// then sleep in the transport's readiness wait (awaitAny) in slices of at
// most kWaitSliceMs. Between the slices it checks the communicator's abort
// flag, the call's deadline and the stall probe (a peer in another call),
// so every wait ends: with the condition, or with a coil::Error naming the
// peers.
#pragma once

#include <sched.h>

#include <vector>

#include "algorithms/call.h"
#include "algorithms/fingerprint.h"
#include "core/cpu_pause.h"
#include "core/error.h"
#include "core/rank_list.h"
#include "transports/caller_io.h"

namespace coil::algo {

/// The timeout of a wait for data from several peers (here, and the FIFO
/// one-shot's), naming every peer whose transfer was not over, not only
/// the first.
[[noreturn]] inline void failDataTimeout(const Call& call, const std::vector<int>& missing,
                                         const char* transport) {
  fail(coilTimeout, call.description(), ": timed out after ", call.watch.deadline.totalMs(),
       " ms waiting for data from ", rankList(missing), " (", transport, "); ",
       missing.size() == 1 ? "the peer" : "these peers",
       " may be stuck, slower, or in a different call");
}

/// Checks a message that arrived from `peer` for the operation `what()`
/// names (built only on a failure): it must carry `expectedTag` (else
/// another operation sent it) and `expected` bytes (else the ranks passed
/// different counts).
template <typename What>
void checkMessage(What&& what, int peer, uint64_t tag, uint64_t expectedTag, size_t got,
                  size_t expected) {
  if (tag != expectedTag)
    fail(coilInvalidUsage, what(), ": mismatched collective with rank ", peer, ": ",
         explainMismatch(tag, expectedTag));
  if (got != expected)
    fail(coilInvalidUsage, what(), ": rank ", peer, " sent ", got, " bytes where ", expected,
         " were expected: the ranks passed different counts");
}

/// checkMessage for a collective call's message.
inline void checkArrival(const Call& call, int peer, uint64_t tag, size_t got, size_t expected) {
  checkMessage([&] { return call.description(); }, peer, tag, call.tag, got, expected);
}

class CallerIoWait {
 public:
  /// `spinUs`: how long a wait polls before it sleeps; `yield`: poll with
  /// sched_yield() (else with pause, handing the core over now and then).
  CallerIoWait(const Call& call, int spinUs, bool yield)
      : call_(call), spinUs_(spinUs), yield_(yield) {}

  /// Advances every path of `group` (all from one transport, none null)
  /// until `done()` holds. A failed path ends the wait with
  /// coilRemoteError quoting it; the deadline with coilTimeout naming the
  /// ranks `missing()` lists (a std::vector<int>; none: the wait goes on),
  /// over `transport`.
  template <typename Done, typename Missing>
  void until(const std::vector<transport::CallerIo*>& group, Done&& done, Missing&& missing,
             const char* transport) {
    const transport::WaitWatch& watch = call_.watch;
    const auto spinUntil = Clock::now() + std::chrono::microseconds(spinUs_);
    for (;;) {
      bool moved = false;
      for (transport::CallerIo* io : group) {
        moved |= io->advance();
        if (!io->failure().empty()) fail(coilRemoteError, call_.description(), ": ", io->failure());
      }
      if (done()) return;
      if (moved) continue;
      if (watch.abortFlag && watch.abortFlag->load(std::memory_order_relaxed))
        fail(coilRemoteError, call_.description(), ": communicator aborted");
      if (watch.deadline.expired()) {
        const std::vector<int> late = missing();
        if (!late.empty()) failDataTimeout(call_, late, transport);
      }
      if (const Clock::time_point now = Clock::now(); now < spinUntil) {
        if (yield_) {
          sched_yield();
        } else {
          cpuPause();
          handover_.poll(now);
        }
        continue;
      }
      watch.checkStall();
      const int ms = watch.deadline.remainingMs();
      group.front()->awaitAny(group, ms < kWaitSliceMs ? (ms > 0 ? ms : 1) : kWaitSliceMs);
    }
  }

 private:
  const Call& call_;
  const int spinUs_;
  const bool yield_;
  CoreHandover handover_;  // pausing: a peer on this core gets it now and then
};

}  // namespace coil::algo
