// How a waiting rank should wait, learned per call.
//
// Three ways to wait for a peer's flag or message, none best everywhere:
//   - sleep at once (futex, poll()): a wake-up costs several µs, ~25 µs when
//     the CPUs are busy with other programs;
//   - poll with `pause` for a while: well under a µs when the peer runs on
//     another core at the same time, but a rank that polls while its peer
//     waits for the same core burns the very time the peer needs;
//   - poll with sched_yield() for a while: hands the core to whoever is
//     runnable, which is the peer when ranks share a core (8 ranks on 2
//     cores) — then a message costs a context switch, not a wake-up — but
//     gives away the rank's time slice when an unrelated program is.
// Which one wins changes with the machine's load, so coil measures it: for
// each message-size class it keeps the average call time of each way, uses
// the cheapest, and now and then tries another (see kExploreEvery).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace coil::tune {

/// One way to wait: poll for `spinUs` (0: sleep at once), yielding the CPU
/// between polls when `yield`, then sleep.
struct WaitPlan {
  int spinUs = 0;
  bool yield = false;
  bool measure = true;  // time this call and record() it (a clock read costs ~25 ns)
};

class SpinAdvisor {
 public:
  /// kAdaptive learns; kAlways always polls with pause (for a machine known
  /// to be quiet, and for measurements). `pauseUs` = 0 never polls with
  /// pause (more ranks than cores); `yieldUs` = 0 never yields.
  enum class Mode { kAdaptive, kAlways };
  SpinAdvisor(int pauseUs = 0, int yieldUs = 0, Mode mode = Mode::kAdaptive)
      : pauseUs_(pauseUs), yieldUs_(yieldUs), mode_(mode) {}

  /// The way to wait in the next call of `bytes`.
  WaitPlan planFor(size_t bytes);
  /// The call of `bytes` that waited by `plan` took `microseconds`.
  void record(size_t bytes, const WaitPlan& plan, double microseconds);

  /// One call in this many tries a way that currently looks worse — or in
  /// kExploreRarely when the others look over kClearlyWorse times as dear,
  /// or are untried while the way in use answers within kSlowUs: an
  /// exploring call costs its extra time, for both ranks of a pair.
  static constexpr uint32_t kExploreEvery = 32;
  static constexpr uint32_t kExploreRarely = 256;
  static constexpr double kClearlyWorse = 1.5;
  /// A less preferred way (pause, then yield, then sleep) must cost less
  /// than this fraction of the preferred one to be chosen.
  static constexpr double kSwitchBelow = 0.8;
  /// Once every way has its first samples, one call in this many is timed
  /// (and every exploring call): the averages need no more.
  static constexpr uint32_t kMeasureEvery = 8;
  /// Calls of a size class that are not measured: the first calls of a
  /// communicator wait for the peers to finish their own start (tens to
  /// hundreds of µs whatever the way of waiting); recorded, they made the
  /// preferred way look dear and left an 8-byte all-reduce yielding at
  /// 4-12 µs per call instead of pausing at 0.25 (issue #12).
  static constexpr uint32_t kStartCalls = 4;
  /// The preferred way is timed on every call until it has this many
  /// samples, then one call in kMeasureEvery. The other ways are tried only
  /// when exploring (first at call kExploreEvery), never up front: a short
  /// run (nccl-tests' -n 20 -w 2) then waits the preferred way throughout.
  static constexpr uint32_t kFirstSamples = 4;
  /// ...unless the preferred way's first samples average more than this:
  /// then the untried ways are tried at once (a busy machine, where a peer
  /// off its core turns each pausing wait into a sleep of ~140 µs).
  static constexpr double kSlowUs = 20.0;
  /// A sample over this many times its way's average counts as this many
  /// times it: one call the machine stalled (a preempted vCPU, 150 µs)
  /// moved a 0.2 µs average to 19 and handed the size class to yielding
  /// for hundreds of calls. The following kConfirmCalls calls are all
  /// timed, and another outlier among them counts in full: a stall that
  /// lasts, or calls that alternate fast and slow, still show.
  static constexpr double kOutlierFactor = 4.0;
  static constexpr uint32_t kConfirmCalls = 8;
  /// A class that left the preferred way tries it again kRetryFirst calls
  /// later, then twice as late each time it still loses, until the gap
  /// reaches kExploreEvery (the usual exploration's); a retry that beats
  /// the way in use takes over at once. The first calls of a fresh process
  /// often meet a peer still starting or sharing its core for a moment, and
  /// a 25-call size then never explored again.
  static constexpr uint32_t kRetryFirst = 4;
  static_assert((kExploreEvery & (kExploreEvery - 1)) == 0 &&
                (kExploreRarely & (kExploreRarely - 1)) == 0 &&
                (kMeasureEvery & (kMeasureEvery - 1)) == 0, "powers of two (masks)");

 private:
  enum Arm { kSleep = 0, kPause = 1, kYield = 2, kArms = 3 };
  struct SizeClass {
    double averageUs[kArms] = {0, 0, 0};
    uint32_t samples[kArms] = {0, 0, 0};
    uint32_t calls = 0;
    uint32_t explored = 0;
    int best = -1;                     // -1 until the first call (then preferred())
    uint32_t interval = kExploreEvery;  // a power of two
    uint32_t confirming = 0;            // calls still timed after an outlier
    uint32_t retryAt = 0;               // call at which to try the preferred way again
    uint32_t retryGap = kRetryFirst;    // calls to the retry after that
  };
  // Inline: planFor asks them several times per call, on a 0.3 µs path.
  static size_t classOf(size_t bytes) {
    // floor(log2(bytes)), capped to the table.
    const size_t c = bytes <= 1 ? 0 : 63 - static_cast<size_t>(__builtin_clzll(bytes));
    return c < kClasses ? c : kClasses - 1;
  }
  bool enabled(int arm) const {
    return arm == kPause ? pauseUs_ > 0 : arm == kYield ? yieldUs_ > 0 : true;
  }
  WaitPlan planOf(int arm) const {
    return arm == kPause ? WaitPlan{pauseUs_, false} : arm == kYield ? WaitPlan{yieldUs_, true}
                                                                      : WaitPlan{0, false};
  }
  // The way a machine with a core per rank answers fastest, and where every
  // size class starts: pause when polling with pause is allowed (ranks <=
  // cores), else yield, else sleep.
  int preferred() const { return pauseUs_ > 0 ? kPause : yieldUs_ > 0 ? kYield : kSleep; }
  void choose(SizeClass& c) const;  // recomputes best and interval after a sample

  int pauseUs_;
  int yieldUs_;
  Mode mode_;
  static constexpr size_t kClasses = 40;
  std::array<SizeClass, kClasses> classes_{};
};

}  // namespace coil::tune
