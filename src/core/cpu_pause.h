// cpuPause(): the hint a spin-wait gives the CPU between two polls (x86's
// PAUSE: it saves power and leaves the pipeline to a sibling hyper-thread);
// nothing where the architecture has no such hint. Here so that the
// algorithms that spin need no architecture test of their own.
//
// CoreHandover: what a pause-polling loop adds so that a peer sharing its
// core is not shut out for the whole spin; moveOffCpu: how a rank that
// finds its peer on its core leaves it.
#pragma once

#include <sched.h>

#include <chrono>

namespace coil {

inline void cpuPause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

/// Hands the core over (sched_yield) once a pause-polling loop has gone
/// kYieldEvery without an answer. Two ranks on a machine with a core each
/// can still be on one core: a futex wake-up puts the woken rank on the
/// waker's core, and forked ranks start on their parent's. Polling with
/// pause then holds the core for the whole spin (50 µs) while the peer it
/// waits for sits runnable behind it, and every call pays it: on 2 cores,
/// 3 of 10 short runs of an 8-byte all-reduce ran at ~70 µs a call instead
/// of 0.2 (2026-11-26). A yield hands such a peer the core at once; alone
/// on its core it returns at once, and a peer on another core answers
/// within the first kYieldEvery of most waits anyway.
class CoreHandover {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::nanoseconds kYieldEvery{500};
  /// Called with the time each time the loop reads the clock.
  void poll(Clock::time_point now) {
    if (last_ == Clock::time_point{}) {
      last_ = now;
    } else if (now - last_ >= kYieldEvery) {
      sched_yield();
      last_ = now;
    }
  }

 private:
  Clock::time_point last_{};
};

/// Moves the calling thread off `cpu` now, within its CPU mask, and leaves
/// the mask as it was: the thread is moved, not bound. Neither a sleep nor
/// a yield separates two ranks that share a core (2026-11-26, 2 cores: the
/// kernel wakes a sleeper on its waker's core, and two ranks taking turns
/// by yielding stayed together for 2000 calls at ~5 µs each). Returns the
/// CPU the thread was moved to (read before the mask is restored: after
/// that the scheduler may move it anywhere in the mask, `cpu` included), or
/// -1 where it could not move: the mask holds no other CPU (a rank bound
/// to one core stays there), or `cpu` is not in it.
inline int moveOffCpu(int cpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof allowed, &allowed) != 0 ||
      !CPU_ISSET(cpu, &allowed) || CPU_COUNT(&allowed) < 2)
    return -1;
  cpu_set_t others = allowed;
  CPU_CLR(cpu, &others);
  // The kernel migrates the calling thread before this returns.
  if (sched_setaffinity(0, sizeof others, &others) != 0) return -1;
  const int landed = sched_getcpu();
  sched_setaffinity(0, sizeof allowed, &allowed);
  return landed;
}

}  // namespace coil
