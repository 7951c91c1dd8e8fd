// Deadlines and the one blocking-wait loop every coil wait goes through.
//
// Every wait in coil has a deadline (COIL_TIMEOUT_MS / coilConfig_t.timeoutMs)
// and watches an abort flag, so coilCommAbort from another thread, a dead
// peer or an expired deadline always ends it. Waiting spins briefly, then
// sleeps on a futex in slices of at most kWaitSliceMs: with more ranks than
// cores (CI runs 8 ranks on 2), pure spinning would starve the rank being
// waited for.
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace coil {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  /// A deadline `ms` milliseconds from now (ms <= 0: effectively never).
  static Deadline after(int64_t ms);
  static Deadline never();
  bool expired() const { return Clock::now() >= at_; }
  /// Milliseconds left, clamped to [0, INT32_MAX].
  int remainingMs() const;
  Clock::time_point at() const { return at_; }
  int64_t totalMs() const { return totalMs_; }

 private:
  Clock::time_point at_{};
  int64_t totalMs_ = 0;
};

/// CLOCK_MONOTONIC_COARSE in milliseconds: ~5 ns, and as fine as the
/// kernel tick (1-4 ms).
int64_t coarseMonotonicMs();

/// The deadlines of one communicator's calls, `timeoutMs` from each call's
/// start. steady_clock costs ~25 ns on the reference VM, a tenth of a small
/// all-reduce, so a deadline is reused while the coarse clock (~5 ns, 4 ms
/// resolution) says it was set less than kReuseMs ago: a call may then time
/// out up to ~12 ms early (reuse plus resolution), never late. A member of
/// the communicator, not a thread_local: its calls are serialized (the link
/// claim), and a thread-local lookup in a shared library costs ~1% more.
class ReusedDeadline {
 public:
  Deadline forCall(int64_t timeoutMs);
  /// coarseMonotonicMs() as the latest forCall read it: when that call
  /// started (the flight recorder's start time, without a clock read of its own).
  int64_t calledAtMs() const { return calledAtMs_; }

 private:
  static constexpr int64_t kReuseMs = 8;
  int64_t calledAtMs_ = 0;
  int64_t timeoutMs_ = -1;
  int64_t setAtMs_ = 0;
  Deadline deadline_ = Deadline::never();
};

/// The longest a waiter sleeps before it re-checks abort flags and peers.
inline constexpr int kWaitSliceMs = 10;

/// Sleeps until *word may differ from `seen`, at most `ms` milliseconds.
/// `word` may live in memory shared between processes. Spurious returns are
/// allowed; callers re-check their condition.
void futexWait(const std::atomic<uint32_t>* word, uint32_t seen, int ms);
/// Wakes every thread sleeping in futexWait on `word`.
void futexWakeAll(const std::atomic<uint32_t>* word);

/// Waits until ready() is true. `word`/`waiters` are the futex word whose
/// change signals progress and a counter of sleepers (the producer only
/// issues a wake syscall when it is non-zero). Between sleeps it calls
/// check(), which throws to end the wait (abort, dead peer); at the deadline
/// it calls onTimeout(), which must throw.
/// `pollUs` > 0 adds a phase between the spin and the sleep: poll for up to
/// that long, yielding the CPU between polls (for a peer known to be working
/// on the same call: it will answer within microseconds, and a futex sleep
/// would cost a wake-up each time; yielding, not pausing, because the peer
/// may share this core).
template <typename Ready, typename Check, typename OnTimeout>
void waitUntil(const std::atomic<uint32_t>& word, std::atomic<uint32_t>& waiters, Ready&& ready,
               Check&& check, const Deadline& deadline, OnTimeout&& onTimeout, int pollUs = 0) {
  // Phase 1: spin. Cheap when the producer is running on another core.
  for (int i = 0; i < 256; ++i) {
    if (ready()) return;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  // Phase 1b: poll, handing the core over between polls.
  if (pollUs > 0) {
    const auto until = Clock::now() + std::chrono::microseconds(pollUs);
    do {
      if (ready()) return;
      sched_yield();
    } while (Clock::now() < until);
  }
  // Phase 2: sleep on the futex in short slices.
  for (;;) {
    uint32_t seen = word.load(std::memory_order_seq_cst);
    if (ready()) return;
    check();
    if (deadline.expired()) onTimeout();
    waiters.fetch_add(1, std::memory_order_seq_cst);
    if (!ready()) {
      int ms = deadline.remainingMs();
      futexWait(&word, seen, ms < kWaitSliceMs ? (ms > 0 ? ms : 1) : kWaitSliceMs);
    }
    waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace coil
