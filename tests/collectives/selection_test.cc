// The per-call algorithm choice (src/tune): which algorithms are available on
// which topology, where the cost model switches between them, COIL_ALGO and
// COIL_TUNE handling (the spin advisor: spin_advisor_test.cc). Pure logic: no
// ranks.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "core/error.h"
#include "transports/transport.h"
#include "tune/tuner.h"

namespace coil::tune {
namespace {

using algo::CollKind;

// COIL_TUNE (or another variable) for one test: the model reads it at construction.
class ScopedTune {
 public:
  explicit ScopedTune(const char* value, const char* name = "COIL_TUNE") : name_(name) {
    setenv(name, value, 1);
  }
  ~ScopedTune() { unsetenv(name_); }

 private:
  const char* name_;
};

// A calibration file with `text`, removed at the end of the test.
class TuneFile {
 public:
  explicit TuneFile(const std::string& text)
      : path_(::testing::TempDir() + "coil_tune_" + std::to_string(getpid()) + ".txt") {
    std::ofstream(path_) << text;
  }
  ~TuneFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The costs the communicator would take from the transport's own traits.
void useTransport(Topology& t, const std::string& name) {
  const coil::transport::Traits traits = coil::transport::createTransport(name)->traits();
  t.transport = name;
  t.fifo = traits.fifo;
  t.oneShot = traits.oneShot;
  t.callerPath = traits.callerPath;
  t.transports = coil::transport::registeredTransports();
}

Topology shmWindow(int n) {
  Topology t;
  t.nranks = n;
  useTransport(t, "shm");
  t.chunkBytes = 4 * (256 << 10);
  t.fifoSlotBytes = 256 << 10;
  t.windowSlotBytes = 1 << 20;
  t.windowInlineBytes = 1908;
  return t;
}

Topology tcp(int n) {
  Topology t;
  t.nranks = n;
  useTransport(t, "tcp");
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

// Two ranks on tcp's express path: the one-shot while its single message
// is cheaper than the ring's two steps, the ring from 128 KiB (measured
// side by side: the one-shot 11 against the ring's 15 us at 32 KiB, about
// even at 64 KiB, 2.3-2.4 against 3.9-4.1 GB/s at 128 KiB; docs/performance.md,
// section 4.3).
TEST(Selection, TcpExpressPathHandsOverToTheRingAtTensOfKilobytes) {
  Topology t = tcp(2);
  t.callerPieceBytes = 1 << 20;
  t.fifoSlotBytes = 1 << 20;
  Model m(t);
  EXPECT_EQ(pick(m, 16 << 10), Algo::kOneShot);
  EXPECT_EQ(pick(m, 64 << 10), Algo::kOneShot);
  EXPECT_EQ(pick(m, 128 << 10), Algo::kRing);
  EXPECT_EQ(pick(m, 1 << 20), Algo::kRing);
}

// Where every peer has a caller-driven path (tcp's express sockets), the
// FIFO programs run on it in pieces of up to its largest message, at its
// costs; COIL_TUNE's caller= sets the piece or turns it off.
TEST(Selection, FifoProgramsRunOnTheCallerDrivenPathsWhereEveryPeerHasOne) {
  Topology t = tcp(3);
  EXPECT_EQ(Model(t).callerPieceBytes(), 0u) << "a peer without a caller-driven path";
  EXPECT_EQ(Model(t).chunkFor(CollKind::AllReduce, Algo::kRing, 64 << 20), t.chunkBytes);
  t.callerPieceBytes = 1 << 20;
  Model m(t);
  EXPECT_EQ(m.callerPieceBytes(), 256u << 10)
      << "pieces of 256 KiB where the path carries up to 1 MiB (tuner.cc, kCallerPieceBytes)";
  EXPECT_EQ(m.chunkFor(CollKind::AllReduce, Algo::kRing, 64 << 20), 256u << 10);
  EXPECT_EQ(m.messagePieceBytes(), 1u << 20) << "point-to-point: the path's largest message";
  EXPECT_GT(t.callerPath.alphaUs, 0.0) << "tcp states its express path's costs";
  EXPECT_DOUBLE_EQ(m.cost(Algo::kRing).betaUsPerB, t.callerPath.betaUsPerB);
  EXPECT_DOUBLE_EQ(m.cost(Algo::kTree).alphaUs, t.callerPath.alphaUs);
  EXPECT_EQ(pick(m, 8), Algo::kOneShot);
  EXPECT_EQ(pick(m, 64 << 20), Algo::kRing);
  Model measured(t);
  measured.setMeasuredLink(60.0, 0.008, "a 1 Gbit/s link");
  EXPECT_DOUBLE_EQ(measured.cost(Algo::kOneShot).alphaUs, 60.0);
  EXPECT_DOUBLE_EQ(measured.cost(Algo::kRing).alphaUs, 120.0) << "a step is two hops";
  {
    ScopedTune off("tcp:caller=0");
    Model fifo(t);
    EXPECT_EQ(fifo.callerPieceBytes(), 0u);
    EXPECT_EQ(fifo.messagePieceBytes(), 0u);
    EXPECT_DOUBLE_EQ(fifo.cost(Algo::kRing).alphaUs, t.fifo.alphaUs);
  }
  {
    ScopedTune smaller("tcp:caller=131072;shm:caller=0");
    EXPECT_EQ(Model(t).callerPieceBytes(), 131072u) << "another transport's entry is ignored";
    EXPECT_EQ(Model(t).messagePieceBytes(), 131072u) << "caller= sets the messages' piece too";
  }
  {
    ScopedTune larger("tcp:caller=1048576");
    EXPECT_EQ(Model(t).callerPieceBytes(), 1u << 20) << "up to the path's largest message";
  }
  for (const char* bad : {"tcp:caller=2097152", "tcp/ring:caller=1024", "window:caller=1024"}) {
    ScopedTune tune(bad);
    EXPECT_THROW(Model bad_model(t), Error) << bad;
  }
  Topology none = tcp(3);
  ScopedTune tune("tcp:caller=1024");
  EXPECT_THROW(Model no_path(none), Error) << "no caller-driven path to set a piece for";
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

// Two hosts of two ranks over tcp, shm inside each host.
Topology twoHosts() {
  Topology t = tcp(4);
  t.hosts = 2;
  t.smallestHost = t.largestHost = 2;
  t.local = coil::transport::createTransport("shm")->traits().fifo;
  return t;
}

// Shm inside each host, tcp across: the FIFO programs' messages across take
// the express sockets (costs: the caller-driven path's) in chunks of whole
// FIFO slices, not pieces of their own; caller=0 puts them back on the
// proxy's FIFOs at the FIFOs' costs.
TEST(Selection, AcrossHostsTheFifoProgramsSendOnTheCallerDrivenPaths) {
  Topology t = twoHosts();
  EXPECT_FALSE(Model(t).mixedCallerPaths());
  EXPECT_DOUBLE_EQ(Model(t).cost(Algo::kRing).betaUsPerB, t.fifo.betaUsPerB);
  t.mixedCallerPaths = true;
  Model m(t);
  EXPECT_TRUE(m.mixedCallerPaths());
  EXPECT_EQ(m.callerPieceBytes(), 0u) << "not every link has one";
  EXPECT_EQ(m.chunkFor(CollKind::AllReduce, Algo::kRing, 64 << 20), t.chunkBytes);
  EXPECT_DOUBLE_EQ(m.cost(Algo::kRing).betaUsPerB, t.callerPath.betaUsPerB);
  EXPECT_DOUBLE_EQ(m.cost(Algo::kTree).alphaUs, t.callerPath.alphaUs);
  Model measured(t);
  measured.setMeasuredLink(60.0, 0.008, "a 1 Gbit/s link");
  EXPECT_DOUBLE_EQ(measured.cost(Algo::kRing).alphaUs, 120.0) << "a step is two hops";
  ScopedTune off("tcp:caller=0");
  Model fifo(t);
  EXPECT_FALSE(fifo.mixedCallerPaths());
  EXPECT_DOUBLE_EQ(fifo.cost(Algo::kRing).alphaUs, t.fifo.alphaUs);
}

TEST(Selection, HierarchicalOnlyAcrossHostsWithRanksToShare) {
  EXPECT_FALSE(Model(tcp(4)).available(CollKind::AllReduce, Algo::kHier, 1 << 20))
      << "one host";
  Topology oneEach = tcp(3);
  oneEach.hosts = 3;  // a rank per host: it would be the flat ring
  EXPECT_FALSE(Model(oneEach).available(CollKind::AllReduce, Algo::kHier, 1 << 20));
  EXPECT_TRUE(Model(twoHosts()).available(CollKind::AllReduce, Algo::kHier, 1 << 20));
  EXPECT_FALSE(Model(twoHosts()).available(CollKind::AllToAll, Algo::kHier, 1 << 20));
  Choice c = choose(Model(tcp(4)), CollKind::AllReduce, 64 << 20, AlgorithmOverride("allreduce:hier"),
                    nullptr);
  EXPECT_TRUE(c.forcedUnavailable);
}

// The link carries 2(H-1)/H·S instead of 2(n-1)/n·S: with the local phases
// nearly free, large calls go hierarchical, as measured (performance.md 4.10).
TEST(Selection, HierarchicalWinsLargeCallsAcrossHosts) {
  Model m(twoHosts());
  EXPECT_EQ(pick(m, 64 << 20), Algo::kHier);
  EXPECT_NE(pick(m, 8), Algo::kHier) << "a few bytes: one message per peer is cheaper";
  // Over a 1 Gbit/s link the local phases hardly count: the ratio nears
  // the link bytes' 1 : 1.5.
  Topology slow = twoHosts();
  slow.fifo.betaUsPerB = 0.008;
  Model s(slow);
  EXPECT_LT(s.predictUs(CollKind::AllReduce, Algo::kHier, 64 << 20),
            0.72 * s.predictUs(CollKind::AllReduce, Algo::kRing, 64 << 20));
  Algo a;
  EXPECT_TRUE(AlgorithmOverride("allreduce:hier").forced(CollKind::AllReduce, &a));
  EXPECT_EQ(a, Algo::kHier);
  EXPECT_THROW(AlgorithmOverride("alltoall:hier"), Error);
}

// Across hosts the built-in tcp costs are loopback's: with them a 64 KiB
// all-reduce on 2 x 2 ranks over a 1 Gbit/s link went to the FIFO one-shot,
// measured 5.8x slower than hier. The link measured at init (link_probe.cc)
// must change that choice, and the probe is asked for only across hosts.
TEST(Selection, TheMeasuredLinkDecidesAcrossHosts) {
  EXPECT_FALSE(Model(tcp(4)).params().probeLink) << "one host: nothing to measure";
  Model m(twoHosts());
  EXPECT_TRUE(m.params().probeLink);
  EXPECT_NE(pick(m, 64 << 10), Algo::kHier) << "with loopback's costs";
  m.setMeasuredLink(60.0, 0.008, "a 1 Gbit/s link");  // what the probe saw on the capped veth
  EXPECT_EQ(pick(m, 64 << 10), Algo::kHier);
  EXPECT_EQ(pick(m, 64 << 20), Algo::kHier);
  EXPECT_NE(m.origin().find("a 1 Gbit/s link"), std::string::npos);
}

// The hierarchical all-gather and reduce-scatter: the link carries
// (H-1)/H·S instead of the flat ring's (n-1)/n·S, 0.5 S against 0.75 S on
// 2 hosts x 2.
TEST(Selection, HierarchicalAllGatherAndReduceScatterAcrossHosts) {
  EXPECT_FALSE(Model(tcp(4)).available(CollKind::AllGather, Algo::kHier, 1 << 20));
  Topology slow = twoHosts();
  slow.fifo.betaUsPerB = 0.008;  // 1 Gbit/s
  Model s(slow);
  EXPECT_TRUE(s.available(CollKind::AllGather, Algo::kHier, 1 << 20));
  const double hier = s.predictUs(CollKind::AllGather, Algo::kHier, 64 << 20);
  const double ring = s.predictUs(CollKind::AllGather, Algo::kRing, 64 << 20);
  EXPECT_LT(hier, 0.72 * ring);
  EXPECT_GT(hier, 0.6 * ring);
  std::vector<Prediction> predictions;
  EXPECT_EQ(choose(s, CollKind::AllGather, 64 << 20, AlgorithmOverride(), &predictions).algorithm,
            Algo::kHier);
  Algo a;
  EXPECT_TRUE(AlgorithmOverride("allgather:hier").forced(CollKind::AllGather, &a));
  EXPECT_EQ(a, Algo::kHier);
  // The reduce-scatter likewise.
  EXPECT_LT(s.predictUs(CollKind::ReduceScatter, Algo::kHier, 64 << 20),
            0.72 * s.predictUs(CollKind::ReduceScatter, Algo::kRing, 64 << 20));
  EXPECT_TRUE(AlgorithmOverride("reducescatter:hier").forced(CollKind::ReduceScatter, &a));
}

// A chain's hop moves one chunk, or the whole message where it is smaller:
// an 8-byte broadcast on 4 ranks is 3 hops of 8 bytes, not of a 2 MiB
// chunk (the model once charged the chunk, and so preferred the tree for
// every small broadcast and reduce).
TEST(Selection, AChainOfASmallMessageCostsItsBytesNotAChunk) {
  const Topology t = tcp(4);
  const Model m(t);
  const double hop = t.fifo.alphaUs + 8 * t.fifo.betaUsPerB;
  EXPECT_NEAR(m.predictUs(CollKind::Broadcast, Algo::kRing, 8), 3 * hop, 0.01 * hop);
  const double reduceHop = hop + 8 * t.fifo.gammaUsPerB;
  EXPECT_NEAR(m.predictUs(CollKind::Reduce, Algo::kChain, 8), 3 * reduceHop, 0.01 * reduceHop);
}

// The rooted one-shot ("oneshot" of broadcast, reduce, gather, scatter;
// algorithms/rooted_oneshot_program.h): only without a window, only while
// each rank sends at most 64 KiB of payload, and costed as the FIFO
// one-shot of its exchange, where the other algorithms pay the agreement
// first.
TEST(Selection, RootedOneShotWithoutAWindowUpTo64KiBSent) {
  const Model two(tcp(2)), three(tcp(3));
  EXPECT_TRUE(two.available(CollKind::Broadcast, Algo::kOneShot, 8));
  EXPECT_TRUE(two.available(CollKind::Broadcast, Algo::kOneShot, 64 << 10));
  EXPECT_FALSE(two.available(CollKind::Broadcast, Algo::kOneShot, (64 << 10) + 1));
  // A reduce of S per rank carries n blocks: 3 ranks send 2 × 3 × S.
  EXPECT_TRUE(three.available(CollKind::Reduce, Algo::kOneShot, 10 << 10));
  EXPECT_FALSE(three.available(CollKind::Reduce, Algo::kOneShot, 11 << 10));
  // Gather and scatter: the model's bytes are all n blocks already.
  EXPECT_TRUE(three.available(CollKind::Gather, Algo::kOneShot, 30 << 10));
  EXPECT_FALSE(three.available(CollKind::Scatter, Algo::kOneShot, 33 << 10));
  EXPECT_FALSE(Model(shmWindow(2)).available(CollKind::Broadcast, Algo::kOneShot, 8))
      << "the window's agreement costs under a microsecond";
  Topology one = tcp(2);
  one.nranks = 1;
  EXPECT_FALSE(Model(one).available(CollKind::Gather, Algo::kOneShot, 8));
}

TEST(Selection, RootedOneShotCostsTheOneShotOfItsExchange) {
  const Topology t = tcp(3);
  const Model m(t);
  const Cost& c = t.oneShot;
  // 3 records of 24 bytes, then the payload in whole words.
  auto oneShotUs = [&](double exchange) {
    return c.alphaUs + 2 * exchange * (c.betaUsPerB + c.gammaUsPerB);
  };
  EXPECT_NEAR(m.predictUs(CollKind::Broadcast, Algo::kOneShot, 5), oneShotUs(72 + 8), 1e-9);
  EXPECT_NEAR(m.predictUs(CollKind::Gather, Algo::kOneShot, 3 * 16), oneShotUs(72 + 48), 1e-9);
  // A reduce's root then reduces the n blocks: (n-1)·S more reductions.
  EXPECT_NEAR(m.predictUs(CollKind::Reduce, Algo::kOneShot, 16),
              oneShotUs(72 + 48) + 2 * 16 * c.gammaUsPerB, 1e-9);
  // The others pay the agreement (a one-shot of the 3 records) first.
  EXPECT_NEAR(m.agreementUs(), oneShotUs(72), 1e-9);
  EXPECT_NEAR(m.callUs(CollKind::Broadcast, Algo::kTree, 5),
              m.agreementUs() + m.predictUs(CollKind::Broadcast, Algo::kTree, 5), 1e-9);
  EXPECT_EQ(m.callUs(CollKind::Broadcast, Algo::kOneShot, 5),
            m.predictUs(CollKind::Broadcast, Algo::kOneShot, 5));
  EXPECT_EQ(m.callUs(CollKind::AllReduce, Algo::kRing, 5),
            m.predictUs(CollKind::AllReduce, Algo::kRing, 5))
      << "only rooted calls agree first";
}

// Over tcp's built-in costs every small rooted call rides in its agreement
// (measured 2.3-5.8x faster at 8 B - 32 KiB, docs/performance.md 4.6);
// COIL_ALGO can force it, or force another algorithm instead.
TEST(Selection, SmallRootedCallsOverTcpTakeTheRootedOneShot) {
  const Model m(tcp(3)), forcing(tcp(3));  // one override per model: it caches its choice
  const AlgorithmOverride others("broadcast:tree,reduce:chain,gather:direct,scatter:direct");
  for (CollKind k : {CollKind::Broadcast, CollKind::Reduce, CollKind::Gather, CollKind::Scatter})
    for (size_t bytes : {size_t{8}, size_t{1} << 10, size_t{8} << 10}) {
      EXPECT_EQ(choose(m, k, bytes, AlgorithmOverride(), nullptr).algorithm, Algo::kOneShot)
          << algo::collName(k) << " " << bytes;
      EXPECT_NE(choose(forcing, k, bytes, others, nullptr).algorithm, Algo::kOneShot)
          << algo::collName(k) << " " << bytes;
    }
  Algo a;
  EXPECT_TRUE(AlgorithmOverride("broadcast:oneshot").forced(CollKind::Broadcast, &a));
  EXPECT_EQ(a, Algo::kOneShot);
  EXPECT_TRUE(AlgorithmOverride("oneshot").forced(CollKind::Scatter, &a));
  EXPECT_EQ(a, Algo::kOneShot);
  EXPECT_FALSE(AlgorithmOverride("oneshot").forced(CollKind::AllToAll, &a));
  // Forced where it cannot run (a window; too large): the model's choice.
  const Choice windowed =
      choose(Model(shmWindow(2)), CollKind::Gather, 64, AlgorithmOverride("oneshot"), nullptr);
  EXPECT_EQ(windowed.algorithm, Algo::kDirect);
  EXPECT_TRUE(windowed.forcedUnavailable);
  EXPECT_NE(choose(m, CollKind::Broadcast, 1 << 20, AlgorithmOverride(), nullptr).algorithm,
            Algo::kOneShot);
}

// The hierarchical broadcast and reduce: the chain host by host crosses
// the link H - 1 times; the model takes the flat chain's hops as crossings
// (ranks dealt to hosts in turn), so across hosts it never prefers the
// flat chain, which with ranks numbered host by host is the same chain.
TEST(Selection, HierarchicalBroadcastAndReduceAcrossHosts) {
  EXPECT_FALSE(Model(tcp(4)).available(CollKind::Broadcast, Algo::kHier, 1 << 20)) << "one host";
  Model m(twoHosts());
  m.setMeasuredLink(60.0, 0.008, "a 1 Gbit/s link");
  for (CollKind k : {CollKind::Broadcast, CollKind::Reduce}) {
    const Algo flat = k == CollKind::Broadcast ? Algo::kRing : Algo::kChain;
    for (size_t bytes : {size_t{8}, size_t{64} << 10, size_t{64} << 20}) {
      EXPECT_LT(m.predictUs(k, Algo::kHier, bytes), m.predictUs(k, flat, bytes)) << bytes;
      // 8 bytes ride in the call's agreement (the rooted one-shot: one
      // round across the link where the chains take two or more).
      const Algo want = bytes == 8 ? Algo::kOneShot : Algo::kHier;
      EXPECT_EQ(choose(m, k, bytes, AlgorithmOverride(), nullptr).algorithm, want) << bytes;
    }
  }
  Algo a;
  EXPECT_TRUE(AlgorithmOverride("broadcast:hier,reduce:hier").forced(CollKind::Reduce, &a));
  EXPECT_EQ(a, Algo::kHier);
}

// Every algorithm the tuner may choose is a registered program (the
// one-shot entry holds its window program and its FIFO program).
TEST(Selection, EveryCandidateHasAProgram) {
  using algo::CollKind;
  for (CollKind k : {CollKind::AllReduce, CollKind::Broadcast, CollKind::Reduce,
                     CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllToAll,
                     CollKind::Gather, CollKind::Scatter, CollKind::Barrier})
    for (Algo a : algorithmsFor(k)) {
      EXPECT_NE(algo::findProgram(k, algoName(a)), nullptr)
          << algo::collName(k) << " " << algoName(a);
    }
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
  for (const char* bad : {"nvlink:alpha=1", "shm/fastest:alpha=1", "shm:alpha", "shm:alpha=-1",
                          "shm:delta=1", "shm:piece=4096", "window/ring:alpha=1", "noColon"}) {
    ScopedTune t(bad);
    EXPECT_THROW(Model m(shmWindow(2)), Error) << bad;
  }
}

// The file `coil_perf --calibrate` writes: its transport's line sets the
// FIFO algorithms; other transports' lines are ignored; COIL_TUNE still wins.
TEST(Selection, CalibrationFileSetsTheTransportsParameters) {
  TuneFile file(
      "# coil calibration, 2026-11-21 20:40:12 UTC, vm, nranks=2\n"
      "shm alpha_us=0.884 beta_us_per_byte=6.73e-05 gamma_us_per_byte=0.000189\n"
      "\n"
      "# coil calibration, 2026-11-21 20:41:00 UTC, vm, nranks=2\n"
      "tcp alpha_us=60 beta_us_per_byte=0.000578 gamma_us_per_byte=0 memory_factor=1\n"
      "window/slice alpha_us=0.5 piece=262144\n");
  ScopedTune path(file.path().c_str(), "COIL_TUNE_FILE");
  {
    Model m(tcp(2));
    EXPECT_DOUBLE_EQ(m.cost(Algo::kRing).alphaUs, 60.0);
    EXPECT_DOUBLE_EQ(m.cost(Algo::kTree).betaUsPerB, 0.000578);
    EXPECT_DOUBLE_EQ(m.cost(Algo::kRing).gammaUsPerB, 0.0);
    EXPECT_NE(m.origin().find(file.path()), std::string::npos) << m.origin();
  }
  {
    Model m(shmWindow(2));
    EXPECT_DOUBLE_EQ(m.cost(Algo::kRing).alphaUs, 0.884);
    EXPECT_DOUBLE_EQ(m.cost(Algo::kRing).gammaUsPerB, 0.000189);
    EXPECT_DOUBLE_EQ(m.cost(Algo::kSlice).alphaUs, 0.5);
    EXPECT_EQ(m.slicePieceBytes(), 262144u);
  }
  {
    ScopedTune t("shm/tree:alpha=7");
    Model m(shmWindow(2));
    EXPECT_DOUBLE_EQ(m.cost(Algo::kTree).alphaUs, 7.0) << "COIL_TUNE is applied after the file";
    EXPECT_DOUBLE_EQ(m.cost(Algo::kRing).alphaUs, 0.884);
  }
}

TEST(Selection, CalibrationFileChangesTheChoice) {
  Model defaults(tcp(4));
  EXPECT_EQ(pick(defaults, 64 << 20), Algo::kRing);
  TuneFile file("tcp alpha_us=1 beta_us_per_byte=0.001\ntcp/tree beta_us_per_byte=0.00001\n");
  ScopedTune path(file.path().c_str(), "COIL_TUNE_FILE");
  EXPECT_EQ(pick(Model(tcp(4)), 64 << 20), Algo::kTree) << "the file made the tree's links cheap";
}

TEST(Selection, BadCalibrationFilesAreNamed) {
  {
    ScopedTune path("/nonexistent/coil-tune.txt", "COIL_TUNE_FILE");
    try {
      Model m(shmWindow(2));
      ADD_FAILURE() << "a missing file must fail";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("/nonexistent/coil-tune.txt"), std::string::npos) << e.what();
    }
  }
  for (const char* text : {"shm alpha_us=abc\n", "shm alpha_us\n", "nvlink alpha_us=1\n",
                           "shm/fastest alpha_us=1\n", "shm delta=1\n", "shm alpha_us=-1\n"}) {
    TuneFile file(std::string("# header\n") + text);
    ScopedTune path(file.path().c_str(), "COIL_TUNE_FILE");
    try {
      Model m(shmWindow(2));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    }
  }
}

// The tree's bandwidth term is the busiest rank's load, counted from the
// real tree shape (tree_shape.h) by an independent walk here.
TEST(Selection, TreeLoadFollowsTheShape) {
  EXPECT_DOUBLE_EQ(algo::doubleTreeLoad(2).sentPerByte, 1.0) << "two ranks: as the ring";
  EXPECT_DOUBLE_EQ(algo::doubleTreeLoad(2).reducedPerByte, 0.5);
  EXPECT_DOUBLE_EQ(algo::doubleTreeLoad(3).sentPerByte, 1.5);
  EXPECT_DOUBLE_EQ(algo::doubleTreeLoad(3).reducedPerByte, 1.0);
  EXPECT_DOUBLE_EQ(algo::doubleTreeLoad(8).sentPerByte, 2.0);
  for (int n = 2; n <= 64; ++n) {
    // Edges of every rank, from the parent links alone: each non-root
    // position has exactly one parent, in each tree.
    std::vector<int> edges(n, 0);
    for (int t = 0; t < 2; ++t)
      for (int r = 0; r < n; ++r) {
        const algo::TreeNode node = algo::treeNode(t, r, n, 0);
        if (node.parent >= 0) ++edges[r], ++edges[node.parent];
      }
    int most = 0;
    for (int e : edges) most = std::max(most, e);
    EXPECT_DOUBLE_EQ(algo::doubleTreeLoad(n).sentPerByte, most / 2.0) << n;
    EXPECT_LE(algo::doubleTreeLoad(n).sentPerByte, 2.0) << n;
  }
  // And the model charges it: with two ranks, ring and tree move the same bytes.
  Topology t = tcp(2);
  t.chunkBytes = 1 << 30;  // one chunk: only the bandwidth terms differ
  ScopedTune a("tcp:alpha=0");
  Model m(t);
  EXPECT_DOUBLE_EQ(m.predictUs(CollKind::AllReduce, Algo::kTree, 64 << 20),
                   m.predictUs(CollKind::AllReduce, Algo::kRing, 64 << 20));
}

// The pipelined chains take the chunk that balances filling the chain
// against hand-offs: C = sqrt(S·α / ((n-2)·β)), in whole slices, at most
// the largest chunk. Everything else keeps the largest chunk.
TEST(Selection, ChainsChooseTheirChunkPerCall) {
  Topology t = shmWindow(8);
  t.sliceBytes = 256 << 10;  // chunkBytes: 4 slices
  ScopedTune tune("shm:alpha=20,beta=0.00005,gamma=0.00005,memory=1");
  Model m(t);
  // 1 MiB over 8 ranks: sqrt(2^20 * 20 / (6 * 5e-5)) = 264 KB -> one slice.
  EXPECT_EQ(m.chunkFor(CollKind::Broadcast, Algo::kRing, 1 << 20), size_t{256} << 10);
  // With γ the reduce's per-byte cost doubles: sqrt(2) smaller, still one slice.
  EXPECT_EQ(m.chunkFor(CollKind::Reduce, Algo::kChain, 1 << 20), size_t{256} << 10);
  // 64 MiB: sqrt(2^26 * 20 / 3e-4) = 2.1 MB -> clamped to the largest, 1 MiB.
  EXPECT_EQ(m.chunkFor(CollKind::Broadcast, Algo::kRing, 64 << 20), size_t{1} << 20);
  // 8 MiB: 748 KB -> 3 slices.
  EXPECT_EQ(m.chunkFor(CollKind::Broadcast, Algo::kRing, 8 << 20), size_t{768} << 10);
  // Not chains: the largest chunk.
  EXPECT_EQ(m.chunkFor(CollKind::AllReduce, Algo::kRing, 1 << 20), size_t{1} << 20);
  EXPECT_EQ(m.chunkFor(CollKind::Broadcast, Algo::kTree, 1 << 20), size_t{1} << 20);
  // Two ranks: no chain to fill, the largest chunk.
  Topology two = shmWindow(2);
  two.sliceBytes = 256 << 10;
  EXPECT_EQ(Model(two).chunkFor(CollKind::Broadcast, Algo::kRing, 1 << 20), size_t{1} << 20);
  // The choice carries the chunk, and the prediction uses it: the chosen
  // chunk predicts no worse than the largest one.
  Choice c = choose(m, CollKind::Broadcast, 1 << 20, AlgorithmOverride("broadcast:ring"), nullptr);
  EXPECT_EQ(c.chunkBytes, size_t{256} << 10);
  const double chosen = m.predictUs(CollKind::Broadcast, Algo::kRing, 1 << 20);
  const double largest = (7 + 1 - 1) * (20 + (1 << 20) * 0.00005);  // one 1 MiB chunk
  EXPECT_LT(chosen, largest);
  EXPECT_NEAR(chosen, (7 + 4 - 1) * (20 + (256 << 10) * 0.00005), 1e-6);
}

}  // namespace
}  // namespace coil::tune
