// The per-call algorithm choice (src/tune): which algorithms are available on
// which topology, where the cost model switches between them, COIL_ALGO and
// COIL_TUNE handling, and the spin advisor's learning. Pure logic: no ranks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "tune/spin_advisor.h"
#include "tune/tuner.h"

namespace coil::tune {
namespace {

using algo::CollKind;

// COIL_TUNE for one test (the model reads it at construction).
class ScopedTune {
 public:
  explicit ScopedTune(const char* value) { setenv("COIL_TUNE", value, 1); }
  ~ScopedTune() { unsetenv("COIL_TUNE"); }
};

Topology shmWindow(int n) {
  Topology t;
  t.nranks = n;
  t.transport = "shm";
  t.chunkBytes = 4 * (256 << 10);
  t.fifoSlotBytes = 256 << 10;
  t.windowSlotBytes = 1 << 20;
  t.windowInlineBytes = 1908;
  return t;
}

Topology tcp(int n) {
  Topology t;
  t.nranks = n;
  t.transport = "tcp";
  t.chunkBytes = 4 * (512 << 10);
  t.fifoSlotBytes = 256 << 10;
  return t;
}

Algo pick(const Model& m, size_t bytes, const std::string& forced = "") {
  return choose(m, CollKind::AllReduce, bytes, AlgorithmOverride(forced), nullptr).algorithm;
}

TEST(Selection, WindowTopologyGoesFromOneShotToSlice) {
  for (int n : {2, 3, 4, 8}) {
    SCOPED_TRACE(n);
    Model m(shmWindow(n));
    EXPECT_EQ(pick(m, 8), Algo::kOneShot);
    EXPECT_EQ(pick(m, 64 << 20), Algo::kSlice) << "beyond the caches, streaming slice wins";
    // A few wide ranges, no flapping: at most one-shot, slice, a FIFO
    // algorithm while the buffers stay in the caches, slice again.
    std::vector<Algo> ranges;
    for (size_t bytes = 4; bytes <= (size_t{256} << 20); bytes *= 2) {
      Algo a = pick(m, bytes);
      if (ranges.empty() || ranges.back() != a) ranges.push_back(a);
    }
    EXPECT_LE(ranges.size(), 4u);
    EXPECT_EQ(ranges.front(), Algo::kOneShot);
    EXPECT_EQ(ranges.back(), Algo::kSlice);
  }
}

TEST(Selection, TwoRanksUseTheMeasuredRanges) {
  // 2 ranks, 32 MiB L3 (the reference machine): one-shot, slice, the FIFO
  // ring while the buffers stay in the cache, slice with streaming stores.
  Topology t = shmWindow(2);
  t.cacheBytes = 32 << 20;
  Model m(t);
  EXPECT_EQ(pick(m, 512), Algo::kOneShot);
  EXPECT_EQ(pick(m, 16 << 10), Algo::kSlice);
  EXPECT_EQ(pick(m, 1 << 20), Algo::kRing);
  EXPECT_EQ(pick(m, 16 << 20), Algo::kSlice);
  EXPECT_TRUE(16 << 20 >= m.streamFromBytes());
}

TEST(Selection, OversubscribedRanksPreferFewerHandshakes) {
  Topology quiet = shmWindow(8);
  quiet.cores = 16;
  Topology crowded = shmWindow(8);
  crowded.cores = 2;
  // 1 KB: slice beats one-shot on 8 idle cores; when 8 ranks share 2
  // cores its second handshake costs more than one-shot's extra bytes.
  auto cheaper = [](const Model& m, Algo a, Algo b, size_t bytes) {
    return m.predictUs(CollKind::AllReduce, a, bytes) < m.predictUs(CollKind::AllReduce, b, bytes);
  };
  EXPECT_TRUE(cheaper(Model(quiet), Algo::kSlice, Algo::kOneShot, 1 << 10));
  EXPECT_TRUE(cheaper(Model(crowded), Algo::kOneShot, Algo::kSlice, 1 << 10));
  EXPECT_EQ(pick(Model(crowded), 8), Algo::kOneShot);
  EXPECT_EQ(pick(Model(crowded), 64 << 20), Algo::kSlice);
}

TEST(Selection, OneShotOnlyWhereItsSlotHoldsTheMessage) {
  Model w(shmWindow(2));
  EXPECT_TRUE(w.available(CollKind::AllReduce, Algo::kOneShot, 1 << 20));
  EXPECT_FALSE(w.available(CollKind::AllReduce, Algo::kOneShot, (1 << 20) + 1));
  Model t(tcp(2));
  EXPECT_TRUE(t.available(CollKind::AllReduce, Algo::kOneShot, 256 << 10));
  EXPECT_FALSE(t.available(CollKind::AllReduce, Algo::kOneShot, (256 << 10) + 1));
  EXPECT_FALSE(t.available(CollKind::AllReduce, Algo::kSlice, 8)) << "slice needs a window";
  Topology single = shmWindow(1);
  single.windowSlotBytes = 0;
  EXPECT_FALSE(Model(single).available(CollKind::AllReduce, Algo::kOneShot, 8));
  // Only all-reduce (and the barrier built on it) has the direct algorithms.
  EXPECT_FALSE(w.available(CollKind::Broadcast, Algo::kOneShot, 8));
  EXPECT_TRUE(w.available(CollKind::Barrier, Algo::kOneShot, 1));
}

TEST(Selection, TcpUsesOneShotForSmallAndRingForLarge) {
  Model m(tcp(2));
  EXPECT_EQ(pick(m, 8), Algo::kOneShot);
  EXPECT_EQ(pick(m, 64 << 20), Algo::kRing);
}

TEST(Selection, ForcedAlgorithmWinsWhereItCanRun) {
  Model w(shmWindow(4));
  EXPECT_EQ(pick(w, 64 << 20, "allreduce:ring"), Algo::kRing);
  EXPECT_EQ(pick(w, 8, "allreduce:slice"), Algo::kSlice);
  Choice c = choose(w, CollKind::AllReduce, 64 << 20, AlgorithmOverride("allreduce:oneshot"), nullptr);
  EXPECT_TRUE(c.forcedUnavailable) << "64 MiB does not fit a one-shot slot";
  EXPECT_EQ(c.algorithm, Algo::kSlice);
  Model t(tcp(2));
  c = choose(t, CollKind::AllReduce, 8, AlgorithmOverride("allreduce:slice"), nullptr);
  EXPECT_TRUE(c.forcedUnavailable);
  EXPECT_EQ(c.algorithm, Algo::kOneShot);
}

TEST(Selection, PredictionsListEveryAvailableCandidate) {
  std::vector<Prediction> p;
  choose(Model(shmWindow(2)), CollKind::AllReduce, 4096, AlgorithmOverride(), &p);
  EXPECT_EQ(p.size(), 4u);  // ring, tree, oneshot, slice
  p.clear();
  choose(Model(tcp(2)), CollKind::AllReduce, 4096, AlgorithmOverride(), &p);
  EXPECT_EQ(p.size(), 3u);  // no slice without a window
}

TEST(Selection, CoilAlgoKnowsTheNewNames) {
  Algo a;
  EXPECT_TRUE(AlgorithmOverride("allreduce:oneshot").forced(CollKind::AllReduce, &a));
  EXPECT_EQ(a, Algo::kOneShot);
  EXPECT_TRUE(AlgorithmOverride("slice").forced(CollKind::AllReduce, &a));
  EXPECT_EQ(a, Algo::kSlice);
  EXPECT_FALSE(AlgorithmOverride("slice").forced(CollKind::Broadcast, &a));
  EXPECT_THROW(AlgorithmOverride("broadcast:slice"), Error);
  EXPECT_THROW(AlgorithmOverride("allreduce:fastest"), Error);
}

TEST(Selection, CoilTuneOverridesOneAlgorithmOrATransport) {
  {
    ScopedTune t("window/slice:alpha=1000000;window/oneshot:alpha=0");
    EXPECT_EQ(pick(Model(shmWindow(2)), 4 << 10), Algo::kOneShot) << "slice made expensive";
  }
  {
    ScopedTune t("window/slice:piece=65536,stream=1048576");
    Model m(shmWindow(2));
    EXPECT_EQ(m.slicePieceBytes(), 65536u);
    EXPECT_EQ(m.streamFromBytes(), 1048576u);
  }
  {
    ScopedTune t("tcp:alpha=1,beta=0.000001;shm:alpha=999");
    Model m(tcp(2));
    EXPECT_DOUBLE_EQ(m.cost(Algo::kRing).alphaUs, 1.0);
    EXPECT_DOUBLE_EQ(m.cost(Algo::kOneShot).alphaUs, 1.0);
    EXPECT_DOUBLE_EQ(m.cost(Algo::kRing).betaUsPerB, 0.000001);
  }
  for (const char* bad : {"ib:alpha=1", "shm/fastest:alpha=1", "shm:alpha", "shm:alpha=-1",
                          "shm:delta=1", "shm:piece=4096", "window/ring:alpha=1", "noColon"}) {
    ScopedTune t(bad);
    EXPECT_THROW(Model m(shmWindow(2)), Error) << bad;
  }
}

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
