// The spin advisor (src/tune/spin_advisor.h): how a waiting rank waits
// (sleep at once, pause-poll, yield-poll) for each message size, learned
// from the times of calls. Pure logic: no ranks.
#include <gtest/gtest.h>

#include "tune/spin_advisor.h"

namespace coil::tune {
namespace {

TEST(SpinAdvisor, DisabledNeverPolls) {
  SpinAdvisor a(0, 0);
  for (int i = 0; i < 100; ++i) {
    WaitPlan p = a.planFor(8);
    EXPECT_EQ(p.spinUs, 0);
    a.record(8, p, 1.0);
  }
}

TEST(SpinAdvisor, AlwaysPollsWhenTold) {
  SpinAdvisor a(50, 200, SpinAdvisor::Mode::kAlways);
  WaitPlan p = a.planFor(8);
  EXPECT_EQ(p.spinUs, 50);
  EXPECT_FALSE(p.yield);
}

// Call times of each way to wait, per size: the advisor should settle on the
// cheapest for each size separately, and keep exploring the others.
TEST(SpinAdvisor, LearnsPerSizeWhichWayIsCheapest) {
  SpinAdvisor a(50, 200);
  auto cost = [](size_t bytes, const WaitPlan& p) {
    if (bytes < 1024) return p.spinUs == 0 ? 20.0 : p.yield ? 5.0 : 1.0;  // small: pause wins
    return p.spinUs == 0 ? 100.0 : p.yield ? 250.0 : 300.0;             // large: sleep wins
  };
  int pauseSmall = 0, sleepLarge = 0, exploredLarge = 0;
  for (int i = 0; i < 640; ++i) {
    WaitPlan s = a.planFor(8);
    a.record(8, s, cost(8, s));
    WaitPlan l = a.planFor(1 << 20);
    a.record(1 << 20, l, cost(1 << 20, l));
    if (i < 64) continue;
    pauseSmall += s.spinUs > 0 && !s.yield;
    sleepLarge += l.spinUs == 0;
    exploredLarge += l.spinUs > 0;
  }
  // After warm-up: the cheapest way except one exploring call in 32.
  EXPECT_GE(pauseSmall, 576 - 576 / 32 - 1);
  EXPECT_GE(sleepLarge, 576 - 576 / 32 - 1);
  EXPECT_GT(exploredLarge, 0) << "the other ways are still tried";
}

// What coil_perf -n 20 -w 2 met on a quiet 2-core machine: the first calls
// of a communicator wait for the peer to finish its own start (tens to
// hundreds of µs, whatever the way of waiting), then pausing answers in
// 0.25 µs and yielding in 4-12 µs. The first ~22 calls must all pause: a
// few yields among them made the mean of 20 timed calls 3-6x the steady
// state (issue #12, "fast from the first call").
TEST(SpinAdvisor, FirstCallsOnAQuietMachinePause) {
  SpinAdvisor a(50, 200);
  auto cost = [](int call, const WaitPlan& p) {
    if (call < 4) return call % 2 ? 90.0 : 170.0;  // the peer is still starting
    return p.yield ? 8.0 : p.spinUs > 0 ? 0.25 : 20.0;
  };
  int pauses = 0;
  for (int call = 0; call < 24; ++call) {
    WaitPlan p = a.planFor(8);
    a.record(8, p, cost(call, p));
    pauses += p.spinUs > 0 && !p.yield;
  }
  EXPECT_EQ(pauses, 24);
  // The next ~230 too (nccl-tests' -n 200 -w 20 in place after out of
  // place): a yield explored at call 32 cost a 20-call row 1.2-1.6 µs on
  // average where it took 0.2-0.3 without one.
  int next = 0;
  for (int call = 24; call < 255; ++call) {
    WaitPlan p = a.planFor(8);
    a.record(8, p, cost(call, p));
    next += p.spinUs > 0 && !p.yield;
  }
  EXPECT_EQ(next, 255 - 24);
  // And later it still explores, and keeps pausing.
  int later = 0;
  for (int call = 255; call < 1024; ++call) {
    WaitPlan p = a.planFor(8);
    a.record(8, p, cost(call, p));
    later += p.spinUs > 0 && !p.yield;
  }
  EXPECT_GE(later, 1024 - 255 - 4);
  EXPECT_LT(later, 1024 - 255) << "the other ways are still tried";
}

// Seen on a quiet machine: after the unrecorded start, calls 5-8 still met
// a peer busy with its own first calls (144, 72, 1.5 and 76 µs), and the
// advisor left pause for yield (4 µs a call) for good. One fast first
// sample says pausing answers fast.
TEST(SpinAdvisor, SlowFirstSamplesWithOneFastOneKeepPausing) {
  SpinAdvisor a(50, 200);
  const double first[] = {150, 150, 150, 150, 144, 72, 1.5, 76};
  int pauses = 0;
  for (int call = 0; call < 64; ++call) {
    WaitPlan p = a.planFor(8);
    const double us = call < 8 ? first[call] : p.yield ? 4.0 : p.spinUs > 0 ? 0.3 : 40.0;
    a.record(8, p, us);
    pauses += p.spinUs > 0 && !p.yield;
  }
  EXPECT_GE(pauses, 62);  // one exploring call at 32 (yield) and maybe one at 64
}

// Exploring a sleep when polling answers in under a microsecond only adds
// a wake-up to both ranks' call: in a 20-call run one of them doubled the
// mean. Sleeping is tried only once polling has turned slow.
TEST(SpinAdvisor, AFastPollIsNeverExploredIntoASleep) {
  SpinAdvisor a(50, 200);
  int sleeps = 0, yields = 0;
  for (int call = 0; call < 600; ++call) {
    WaitPlan p = a.planFor(8);
    a.record(8, p, p.spinUs == 0 ? 40.0 : p.yield ? 2.0 : 0.3);
    sleeps += p.spinUs == 0;
    yields += p.yield;
  }
  EXPECT_EQ(sleeps, 0);
  EXPECT_GT(yields, 0) << "yielding is still tried";
}

// The same start on a busy machine (a compiler on both cores): pausing
// ends in a sleep, ~140 µs a call; yielding answers in ~4. The advisor
// must not wait for its first exploring call (call 32) to find that out.
TEST(SpinAdvisor, ABusyMachineLeavesPauseEarly) {
  SpinAdvisor a(50, 200);
  auto cost = [](int call, const WaitPlan& p) {
    if (call < 4) return 150.0;
    return p.yield ? 4.0 : p.spinUs > 0 ? 140.0 : 30.0;
  };
  int pauses = 0;
  for (int call = 0; call < 32; ++call) {
    WaitPlan p = a.planFor(8);
    a.record(8, p, cost(call, p));
    pauses += p.spinUs > 0 && !p.yield;
  }
  // The start, the first samples, one more at most, and the two early
  // retries of pausing (4 and 8 calls after leaving it) that let a class
  // come back from a slow start (AClassThatLeftPauseAtAStartReturns...).
  EXPECT_LE(pauses, 4 + 4 + 1 + 2);
  WaitPlan p = a.planFor(8);
  EXPECT_TRUE(p.yield);
}

// One call of a pausing run that the machine stalled (a preempted vCPU:
// 150 µs) must not hand the size class to yielding, which then costs every
// call until pausing's average has decayed: on the 2-vCPU machine such a
// run spent hundreds of 8-byte calls at 0.4 µs instead of 0.2.
TEST(SpinAdvisor, OneStalledCallDoesNotLeavePause) {
  SpinAdvisor a(50, 200);
  auto cost = [](const WaitPlan& p) { return p.yield ? 2.0 : p.spinUs > 0 ? 0.2 : 20.0; };
  for (int i = 0; i < 100; ++i) {
    WaitPlan p = a.planFor(8);
    a.record(8, p, cost(p));
  }
  // The next measured pausing call stalls.
  for (bool stalled = false; !stalled;) {
    WaitPlan p = a.planFor(8);
    stalled = p.measure && p.spinUs > 0 && !p.yield;
    a.record(8, p, stalled ? 150.0 : cost(p));
  }
  int pauses = 0;
  for (int i = 0; i < 200; ++i) {
    WaitPlan p = a.planFor(8);
    a.record(8, p, cost(p));
    pauses += p.spinUs > 0 && !p.yield;
  }
  EXPECT_GE(pauses, 200 - 200 / 32 - 1);
}

// ...while a stall that lasts is followed within a few calls.
TEST(SpinAdvisor, AStallThatLastsLeavesPauseSoon) {
  SpinAdvisor a(50, 200);
  for (int i = 0; i < 200; ++i) {
    WaitPlan p = a.planFor(64);
    a.record(64, p, p.yield ? 2.0 : p.spinUs > 0 ? 0.2 : 20.0);
  }
  int call = 0;
  for (; call < 200; ++call) {
    WaitPlan p = a.planFor(64);
    if (p.yield && call > 0 && !p.measure) break;  // yielding, and not to explore
    a.record(64, p, p.yield ? 2.0 : p.spinUs > 0 ? 80.0 : 15.0);
  }
  EXPECT_LT(call, 48) << "still pausing after " << call << " calls of 80 µs";
}

// What tools/compare met over tcp in 2 runs of 3: the two ranks of a fresh
// process shared a vCPU for their first calls, pausing looked slow and the
// class went to sleeping (58 µs a call); the scheduler then spread them, but
// a 25-call size never explored again and stayed at 58 µs instead of 5.
TEST(SpinAdvisor, AClassThatLeftPauseAtAStartReturnsOncePauseIsFast) {
  SpinAdvisor a(50, 200);
  auto cost = [](int call, const WaitPlan& p) {
    if (call < 12) return p.yield ? 30.0 : p.spinUs > 0 ? 100.0 : 58.0;  // sharing a vCPU
    return p.yield ? 7.0 : p.spinUs > 0 ? 5.0 : 58.0;                    // spread out
  };
  int pauses = 0;
  for (int call = 0; call < 25; ++call) {
    WaitPlan p = a.planFor(8);
    a.record(8, p, cost(call, p));
    if (call >= 20) pauses += p.spinUs > 0 && !p.yield;
  }
  EXPECT_EQ(pauses, 5) << "the last 5 of 25 calls should pause again";
}

// What the tcp one-shot met when one rank overslept its 50 µs of polling:
// the pair locked into calls alternating 4 µs and 120 µs (each rank's wait
// took the other's wake-up), a mean of 62 µs. Yielding polls for 200 µs,
// past the wake-up, and breaks the cycle: the class must leave pausing.
TEST(SpinAdvisor, CallsAlternatingFastAndSlowLeavePause) {
  SpinAdvisor a(50, 200);
  int yields = 0;
  for (int call = 0; call < 80; ++call) {
    WaitPlan p = a.planFor(8);
    a.record(8, p, p.yield ? 6.0 : p.spinUs > 0 ? (call % 2 ? 120.0 : 4.2) : 60.0);
    if (call >= 40) yields += p.yield;
  }
  EXPECT_GE(yields, 32) << "of the calls 40-79";
}

TEST(SpinAdvisor, FollowsAChangeOfLoad) {
  SpinAdvisor a(50, 200);
  for (int i = 0; i < 200; ++i) {
    WaitPlan p = a.planFor(64);
    a.record(64, p, p.spinUs > 0 && !p.yield ? 1.0 : 10.0);  // quiet: pause wins
  }
  for (int i = 0; i < 2000; ++i) {
    WaitPlan p = a.planFor(64);
    a.record(64, p, p.yield ? 2.0 : p.spinUs > 0 ? 80.0 : 15.0);  // ranks share a core: yield wins
  }
  int yields = 0;
  for (int i = 0; i < 64; ++i) {
    WaitPlan p = a.planFor(64);
    a.record(64, p, p.yield ? 2.0 : p.spinUs > 0 ? 80.0 : 15.0);
    yields += p.yield;
  }
  EXPECT_GE(yields, 60);
}

}  // namespace
}  // namespace coil::tune
