#include "tune/spin_advisor.h"

#include <algorithm>

namespace coil::tune {

// The cheapest way wins, but in the order of preference pause, yield,
// sleep, a later one only when clearly (kSwitchBelow) cheaper: measured ties
// are common when the peer answers at once, and then pause costs nothing
// while a yield is a system call. Exploring gets rare when the other ways
// look clearly dearer. Ways not tried yet do not compete.
void SpinAdvisor::choose(SizeClass& c) const {
  int best = -1;
  for (int a : {kPause, kYield, kSleep}) {
    if (!enabled(a) || c.samples[a] == 0) continue;
    if (best < 0 || c.averageUs[a] < kSwitchBelow * c.averageUs[best]) best = a;
  }
  if (best < 0) return;
  double runnerUp = 0;
  for (int a = 0; a < kArms; ++a)
    if (a != best && enabled(a) && c.samples[a] > 0 && (runnerUp == 0 || c.averageUs[a] < runnerUp))
      runnerUp = c.averageUs[a];
  c.best = best;
  // Nothing to compare with yet: a way that answers within kSlowUs is first
  // questioned at call kExploreRarely, not kExploreEvery. An exploring yield
  // costs both ranks 4-12 µs, a 20-call row of 0.2 µs calls that met one
  // averaged 1.2-1.6 µs, and a slow way is left at once anyway (planFor).
  const bool fastAlone = runnerUp == 0 && c.averageUs[best] <= kSlowUs;
  c.interval = fastAlone || runnerUp > kClearlyWorse * c.averageUs[best] ? kExploreRarely : kExploreEvery;
}

WaitPlan SpinAdvisor::planFor(size_t bytes) {
  if (mode_ == Mode::kAlways) {
    WaitPlan p = planOf(pauseUs_ > 0 ? kPause : kSleep);
    p.measure = false;
    return p;
  }
  SizeClass& c = classes_[classOf(bytes)];
  ++c.calls;
  if (c.best < 0) c.best = preferred();
  if (c.calls <= kStartCalls) {
    // The peers may still be finishing their own start: what these calls
    // take says nothing about the way they waited, so none is recorded.
    WaitPlan p = planOf(c.best);
    p.measure = false;
    return p;
  }
  // Away from the preferred way: try it again soon, then ever more rarely,
  // until the usual exploration (every c.interval calls) takes over.
  if (const int pref = preferred(); c.best != pref && c.samples[pref] >= kFirstSamples) {
    if (c.retryAt == 0) c.retryAt = c.calls + c.retryGap;
    if (c.retryGap < kExploreEvery && c.calls >= c.retryAt) {
      c.retryGap *= 2;
      c.retryAt = c.calls + c.retryGap;
      return planOf(pref);
    }
  } else {
    c.retryAt = 0;
    c.retryGap = kRetryFirst;
  }
  // Explore now when the preferred way turned out slow (a busy machine: the
  // peer is off its core and pausing ends in a sleep) and another way has
  // not been tried; otherwise every c.interval calls.
  auto untried = [&] {
    for (int a = 0; a < kArms; ++a)
      if (a != c.best && enabled(a) && c.samples[a] == 0) return true;
    return false;
  };
  // (The way in use answering slowly is rare: asked first, it spares the loop.)
  const bool slow = c.samples[c.best] >= kFirstSamples && c.averageUs[c.best] > kSlowUs && untried();
  if (slow || (c.calls & (c.interval - 1)) == 0) {
    // Explore: the other ways in turn. Not sleeping while polling answers
    // within kSlowUs: a sleep then only adds a wake-up (10-100 µs, for both
    // ranks of a pair), and one such call in a short run's 20 doubled its mean.
    const bool sleepMayWin = c.averageUs[c.best] > kSlowUs || c.best == kSleep;
    for (int k = 1; k < kArms; ++k) {
      const int a = static_cast<int>((c.best + k + c.explored) % kArms);
      if (a == kSleep && !sleepMayWin) continue;
      if (a != c.best && enabled(a)) {
        ++c.explored;
        return planOf(a);
      }
    }
  }
  WaitPlan p = planOf(c.best);
  p.measure = c.samples[c.best] < kFirstSamples || c.confirming > 0 ||
              (c.calls & (kMeasureEvery - 1)) == 0;
  return p;
}

void SpinAdvisor::record(size_t bytes, const WaitPlan& plan, double microseconds) {
  if (mode_ == Mode::kAlways || !plan.measure) return;
  SizeClass& c = classes_[classOf(bytes)];
  const int arm = plan.spinUs == 0 ? kSleep : plan.yield ? kYield : kPause;
  // The least of a way's first kFirstSamples (a peer still busy with its
  // own first calls makes single calls of 70-150 µs whatever the way: they
  // must not decide), then an exponential average of the last ~8 samples:
  // recent load counts most. Outliers and retries: spin_advisor.h.
  double& avg = c.averageUs[arm];
  if (c.samples[arm] == 0) {
    avg = microseconds;
  } else if (c.samples[arm] < kFirstSamples) {
    avg = std::min(avg, microseconds);
  } else {
    const bool recentOutlier = c.confirming > 0;
    if (c.confirming > 0) --c.confirming;
    if (microseconds > kOutlierFactor * avg) {
      // The first outlier in a while is clipped; a second one soon after
      // is not a one-off (calls alternating fast and slow: each slow one
      // counts in full, or the mean they make would never show).
      if (!recentOutlier) microseconds = kOutlierFactor * avg;
      c.confirming = kConfirmCalls;
    }
    // A retry of the preferred way that beats the way in use takes over at
    // once: it just showed the preferred way works again.
    if (arm == preferred() && arm != c.best && microseconds < kSwitchBelow * c.averageUs[c.best])
      avg = microseconds;
    else
      avg += (microseconds - avg) / 8.0;
  }
  ++c.samples[arm];
  choose(c);
}

}  // namespace coil::tune
