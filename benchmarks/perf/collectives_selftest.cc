// Self-tests of the per-collective logic (no coil calls): sizes and bus
// factors, in-place pointers, the expectations of expect.h against a
// reference that moves the bytes of n simulated ranks by hand, and the
// cost-model formulas, fits and calibration file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "collectives.h"
#include "expect.h"
#include "model_fit.h"
#include "predict.h"
#include "selftest_reference.h"

namespace coil_perf {
namespace {

using Bytes = std::vector<unsigned char>;

TEST(Collectives, SizesFollowNcclTests) {
  // 4 ranks, float: all-gather of 1000 B is 4 blocks of 62 elements (992 B).
  const Layout ag = layoutFor(Collective::AllGather, 1000, 4, 4);
  EXPECT_EQ(ag.count, 62u);
  EXPECT_EQ(ag.sendCount, 62u);
  EXPECT_EQ(ag.recvCount, 248u);
  EXPECT_EQ(ag.totalCount, 248u);
  EXPECT_EQ(ag.bytes, 992u);
  const Layout rs = layoutFor(Collective::ReduceScatter, 1000, 4, 4);
  EXPECT_EQ(rs.sendCount, 248u);
  EXPECT_EQ(rs.recvCount, 62u);
  const Layout sc = layoutFor(Collective::Scatter, 1000, 4, 4);
  EXPECT_EQ(sc.sendCount, 248u);
  EXPECT_EQ(sc.recvCount, 62u);
  const Layout a2a = layoutFor(Collective::AllToAll, 1000, 4, 4);
  EXPECT_EQ(a2a.sendCount, 248u);
  EXPECT_EQ(a2a.recvCount, 248u);
  const Layout ar = layoutFor(Collective::AllReduce, 1002, 4, 4);
  EXPECT_EQ(ar.count, 250u);
  EXPECT_EQ(ar.bytes, 1000u);
  EXPECT_EQ(layoutFor(Collective::SendRecv, 8, 8, 3).count, 1u);
  EXPECT_EQ(layoutFor(Collective::Gather, 8, 4, 3).count, 0u);  // below one block

  EXPECT_DOUBLE_EQ(busFactor(Collective::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busFactor(Collective::AllReduce, 1), 0.0);
  for (Collective c : {Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll,
                       Collective::Gather, Collective::Scatter}) {
    EXPECT_DOUBLE_EQ(busFactor(c, 4), 0.75);
  }
  for (Collective c : {Collective::Broadcast, Collective::Reduce, Collective::SendRecv}) {
    EXPECT_DOUBLE_EQ(busFactor(c, 4), 1.0);
  }
}

TEST(Collectives, InPlacePointers) {
  std::vector<float> buf(64);
  const Layout l = layoutFor(Collective::AllGather, 64 * 4, 4, 4);  // blocks of 16
  const void* send = nullptr;
  void* recv = nullptr;
  inPlacePointers(Collective::AllGather, buf.data(), l, 4, 2, &send, &recv);
  EXPECT_EQ(recv, buf.data());
  EXPECT_EQ(send, buf.data() + 32);
  inPlacePointers(Collective::ReduceScatter, buf.data(), l, 4, 3, &send, &recv);
  EXPECT_EQ(send, buf.data());
  EXPECT_EQ(recv, buf.data() + 48);
  inPlacePointers(Collective::Broadcast, buf.data(), l, 4, 1, &send, &recv);
  EXPECT_EQ(send, recv);
  EXPECT_THROW(inPlacePointers(Collective::AllToAll, buf.data(), l, 4, 0, &send, &recv),
               std::logic_error);
}

// Moves the bytes of `coll` among n simulated ranks as its contract says,
// reducing with the reference arithmetic: the expected recv buffers.
std::vector<Bytes> simulate(const CollCall& c, const Layout& l, int n,
                            const std::vector<Bytes>& send) {
  const size_t t = c.type.size, b = l.count;
  std::vector<Bytes> out(n, Bytes(l.recvCount * t, 0));
  auto copy = [&](int to, size_t toElem, int from, size_t fromElem, size_t elems) {
    std::memcpy(&out[to][toElem * t], &send[from][fromElem * t], elems * t);
  };
  auto reduceInto = [&](int to, size_t toElem, size_t fromElem) {
    reference::reduceElement([&](int r) { return &send[r][fromElem * t]; }, n, c.type, c.op,
                             &out[to][toElem * t]);
  };
  for (int r = 0; r < n; ++r) {
    const size_t own = static_cast<size_t>(r) * b;
    switch (c.coll) {
      case Collective::AllReduce:
        for (size_t i = 0; i < l.recvCount; ++i) reduceInto(r, i, i);
        break;
      case Collective::Reduce:
        if (r == c.root)
          for (size_t i = 0; i < l.recvCount; ++i) reduceInto(r, i, i);
        break;
      case Collective::ReduceScatter:
        for (size_t j = 0; j < b; ++j) reduceInto(r, j, own + j);
        break;
      case Collective::Broadcast: copy(r, 0, c.root, 0, l.recvCount); break;
      case Collective::Scatter: copy(r, 0, c.root, own, b); break;
      case Collective::SendRecv: copy(r, 0, (r - 1 + n) % n, 0, l.recvCount); break;
      case Collective::AllGather:
      case Collective::Gather:
        if (c.coll == Collective::Gather && r != c.root) break;
        for (int q = 0; q < n; ++q) copy(r, static_cast<size_t>(q) * b, q, 0, b);
        break;
      case Collective::AllToAll:
        for (int q = 0; q < n; ++q) copy(r, static_cast<size_t>(q) * b, q, own, b);
        break;
    }
  }
  return out;
}

TEST(Expectations, MatchAReferenceOfEveryCollectiveAndCatchMistakes) {
  for (const CollectiveInfo& coll : allCollectives()) {
    for (int n : {1, 2, 3, 5}) {
      for (const TypeInfo& t : allTypes()) {
        const std::vector<OpInfo> ops =
            coll.reduces ? allOps() : std::vector<OpInfo>{{"none", coilSum}};
        for (const OpInfo& o : ops) {
          if (!opTakesType(o, t)) continue;
          SCOPED_TRACE(std::string(coll.name) + " " + t.name + " " + o.name +
                       " n=" + std::to_string(n));
          // 37 elements per block plus a ragged tail that must be dropped.
          const Layout l =
              layoutFor(coll.id, (37 * static_cast<size_t>(n) + 1) * t.size + 1, t.size, n);
          CollCall c;
          c.coll = coll.id;
          c.count = l.count;
          c.type = t;
          c.op = o.op;
          c.root = n - 1;
          std::vector<Bytes> send(n, Bytes(l.sendCount * t.size, 0));
          for (int r = 0; r < n; ++r) {
            c.send = send[r].data();
            fillCollectiveInput(c, l, r, n);
          }
          std::vector<Bytes> recv = simulate(c, l, n, send);
          for (int r = 0; r < n; ++r) {
            c.recv = recv[r].data();
            EXPECT_EQ(checkCollectiveOutput(c, l, r, n).count, 0u) << "rank " << r;
          }
          // A flipped bit on a rank that receives is one wrong element.
          const int victim = coll.rooted ? c.root : n - 1;
          c.recv = recv[victim].data();
          recv[victim][(l.recvCount - 1) * t.size] ^= 1;
          const WrongReport w = checkCollectiveOutput(c, l, victim, n);
          EXPECT_EQ(w.count, 1u);
          EXPECT_EQ(w.firstIndex, l.recvCount - 1);
          // A poisoned buffer is all wrong.
          poisonCollectiveOutput(c, l, victim);
          EXPECT_EQ(checkCollectiveOutput(c, l, victim, n).count, l.recvCount);
          // Two blocks swapped (a block from the wrong rank) are caught.
          if (n >= 2 && l.recvCount == l.count * static_cast<size_t>(n)) {
            recv = simulate(c, l, n, send);
            c.recv = recv[victim].data();
            std::swap_ranges(recv[victim].begin(), recv[victim].begin() + l.count * t.size,
                             recv[victim].begin() + l.count * t.size);
            EXPECT_GT(checkCollectiveOutput(c, l, victim, n).count, l.count / 2);
          }
        }
      }
    }
  }
}

TEST(Expectations, SendRecvAndBroadcastDependOnTheSource) {
  // Data of rank 0 offered where rank 1's is expected must not pass.
  const TypeInfo& t = typeInfo(coilUint8);
  Bytes a(100), b(100);
  fillCopyInput(a.data(), 100, t, 0, 0);
  fillCopyInput(b.data(), 100, t, 1, 0);
  EXPECT_GT(countWrongCopy(a.data(), 100, t, 1, 0).count, 90u);
  EXPECT_EQ(countWrongCopy(b.data(), 100, t, 1, 0).count, 0u);
  EXPECT_GT(countWrongCopy(b.data() + 1, 99, t, 1, 0).count, 90u);  // shifted by one element
}

TEST(Predict, MirrorsTheTunersFormulas) {
  const ModelParams m{5.0, 1.0 / 6000.0, 1.0 / 8000.0};
  const double S = 8 << 20;
  const size_t C = 1 << 20;
  // ring: rounds = ceil(8 MiB / (4 * 1 MiB)) = 2 -> 2*3*2*5 + 1.5*S/6000 + 0.75*S/8000
  EXPECT_NEAR(predictRingAllReduceUs(m, 4, S, C), 60 + 2097.152 + 786.432, 1e-6);
  // tree, 4 ranks: chunks = ceil(8 MiB / 2 MiB) = 4, depth 2; every rank has 3
  // tree edges (sends 1.5 S) and the busiest reduces 2 children's halves (S)
  // -> (2*2 + 2*3)*5 + 1.5*S/6000 + S/8000
  EXPECT_NEAR(predictTreeAllReduceUs(m, 4, S, C), 50 + 1.5 * S / 6000 + S / 8000, 1e-6);
  // 2 ranks: one edge per tree, as the ring's bytes: (2 + 2*3)*5 + S/6000 + S/2/8000
  EXPECT_NEAR(predictTreeAllReduceUs(m, 2, S, C), 40 + S / 6000 + S / 2 / 8000, 1e-6);
  EXPECT_NEAR(predictAllGatherUs(m, 4, S), 15 + 0.75 * S / 6000, 1e-6);
  EXPECT_NEAR(predictRingAllReduceUs(m, 1, S, C), S / 6000, 1e-9);
  EXPECT_NEAR(predictRingAllReduceUs(m, 2, 8, C), 2 * 5 + 8.0 / 6000 + 4.0 / 8000, 1e-12);
}

TEST(Fit, RecoversTheParametersOfExactData) {
  const ModelParams truth{7.5, 1.0 / 5000.0, 1.0 / 9000.0};
  const size_t chunk = 1 << 20;
  for (int n : {2, 3, 8}) {
    std::vector<Sample> gather, ring;
    for (double S = 64; S <= (64 << 20); S *= 2) {
      gather.push_back({S, predictAllGatherUs(truth, n, S)});
      if (S >= (256 << 10)) ring.push_back({S, predictRingAllReduceUs(truth, n, S, chunk)});
    }
    ModelParams fit = fitAllGather(gather, n);
    EXPECT_NEAR(fit.alphaUs, truth.alphaUs, 1e-6 * truth.alphaUs);
    EXPECT_NEAR(fit.betaUsPerByte, truth.betaUsPerByte, 1e-6 * truth.betaUsPerByte);
    fit.gammaUsPerByte = fitRingGamma(ring, n, fit, chunk);
    EXPECT_NEAR(fit.gammaUsPerByte, truth.gammaUsPerByte, 1e-5 * truth.gammaUsPerByte);
  }
}

TEST(Fit, RelativeWeightsKeepAlphaFromTheSmallSizes) {
  // 10% noise on alternate samples: α must stay near the small-size times
  // (an unweighted fit lets the 64 MiB samples decide it).
  const ModelParams truth{20.0, 1.0 / 1000.0, 0};
  std::vector<Sample> samples;
  int i = 0;
  for (double S = 8; S <= (64 << 20); S *= 2, ++i) {
    samples.push_back({S, predictAllGatherUs(truth, 2, S) * (i % 2 ? 1.1 : 0.9)});
  }
  const ModelParams fit = fitAllGather(samples, 2);
  EXPECT_NEAR(fit.alphaUs, 20.0, 2.0);
  EXPECT_NEAR(fit.betaUsPerByte * 1000.0, 1.0, 0.1);
}

TEST(Fit, ClampsNegativeSolutionsAndRejectsTooLittleData) {
  // Times that fall with size cannot be explained: β < 0 -> 0, α refitted.
  const ModelParams fit = fitAllGather({{100, 50}, {1000, 40}, {10000, 30}}, 2);
  EXPECT_GE(fit.alphaUs, 0);
  EXPECT_EQ(fit.betaUsPerByte, 0);
  EXPECT_THROW(fitAllGather({{100, 50}}, 2), std::invalid_argument);
  EXPECT_THROW(fitAllGather({{100, 50}, {1000, 60}}, 1), std::invalid_argument);
  EXPECT_THROW(fitRingGamma({}, 2, fit, 1 << 20), std::invalid_argument);
  // α and β alone predict more than was measured: γ < 0, clamped to 0.
  double unclamped = 0;
  EXPECT_EQ(fitRingGamma({{1 << 20, 1}}, 2, {100, 0.1, 0}, 1 << 20, &unclamped), 0.0);
  EXPECT_LT(unclamped, 0.0);
}

TEST(Fit, RecoversTheMemoryFactorAndTheTreesBeta) {
  const ModelParams truth{7.5, 1.0 / 5000.0, 1.0 / 9000.0, 2.5, size_t{32} << 20};
  const size_t chunk = 1 << 20;
  for (int n : {2, 3, 8}) {
    ModelParams tree = truth;
    tree.betaUsPerByte = 1.0 / 3000.0;
    tree.memoryFactor = 1.7;
    std::vector<Sample> rings, inCache, trees;
    for (double S = 256 << 10; S <= (256 << 20); S *= 2) {
      rings.push_back({S, predictRingAllReduceUs(truth, n, S, chunk)});
      trees.push_back({S, predictTreeAllReduceUs(tree, n, S, chunk)});
      if (memoryScale(truth, n, S) == 1.0) inCache.push_back(trees.back());
    }
    ASSERT_LT(inCache.size(), trees.size()) << "some sizes must be beyond the cache";
    ModelParams fit = truth;
    fit.memoryFactor = 1;
    auto ringAt = [&](const ModelParams& p, double S) { return predictRingAllReduceUs(p, n, S, chunk); };
    auto treeAt = [&](const ModelParams& p, double S) { return predictTreeAllReduceUs(p, n, S, chunk); };
    EXPECT_NEAR(fitMemoryFactor(rings, n, fit, ringAt), 2.5, 1e-6);
    EXPECT_NEAR(fitTreeBeta(inCache, n, fit, chunk) * 3000.0, 1.0, 1e-6);
    fit.betaUsPerByte = tree.betaUsPerByte;
    EXPECT_NEAR(fitMemoryFactor(trees, n, fit, treeAt), 1.7, 1e-6);
  }
  ModelParams noCache = truth;
  noCache.cacheBytes = 0;
  EXPECT_EQ(fitMemoryFactor({{1e9, 1e6}}, 2, noCache,
                            [](const ModelParams& p, double S) { return S * p.betaUsPerByte; }),
            1.0)
      << "no cache size: no factor";
}

TEST(CalibrationFile, WritesMergesAndReadsBack) {
  const std::string path = ::testing::TempDir() + "coil_perf_calibration_test.txt";
  std::remove(path.c_str());
  const ModelParams shmA{5.25, 0.000166667, 0.000125, 1.5};
  const ModelParams shmB{4.5, 0.0002, 0.0001, 3};
  ModelParams shmBTree = shmB;
  shmBTree.betaUsPerByte = 0.0003;
  writeCalibrationFile(path, "shm", {shmA, shmA}, 2, "hostA", "2024-01-02");
  writeCalibrationFile(path, "tcp", {{25, 0.00066, 0.0001}, {25, 0.00066, 0.0001}}, 4, "hostB",
                       "2024-01-03");
  writeCalibrationFile(path, "shm", {shmA, shmBTree}, 2, "hostA", "2024-01-03");
  writeCalibrationFile(path, "shm", {shmB, shmBTree}, 2, "hostC", "2024-01-04");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "# coil calibration, 2024-01-03, hostB, nranks=4\n"
            "tcp alpha_us=25 beta_us_per_byte=0.00066 gamma_us_per_byte=0.0001 memory_factor=1\n"
            "# coil calibration, 2024-01-04, hostC, nranks=2\n"
            "shm alpha_us=4.5 beta_us_per_byte=0.0002 gamma_us_per_byte=0.0001 memory_factor=3\n"
            "shm/tree beta_us_per_byte=0.0003 memory_factor=3\n");
  const Calibration shm = readCalibrationFile(path, "shm");
  EXPECT_DOUBLE_EQ(shm.ring.alphaUs, 4.5);
  EXPECT_DOUBLE_EQ(shm.ring.betaUsPerByte, 0.0002);
  EXPECT_DOUBLE_EQ(shm.ring.memoryFactor, 3);
  EXPECT_DOUBLE_EQ(shm.tree.betaUsPerByte, 0.0003);
  EXPECT_DOUBLE_EQ(shm.tree.alphaUs, 4.5);
  EXPECT_DOUBLE_EQ(readCalibrationFile(path, "tcp").ring.alphaUs, 25);
  EXPECT_DOUBLE_EQ(readCalibrationFile(path, "tcp").tree.betaUsPerByte, 0.00066);
  EXPECT_THROW(readCalibrationFile(path, "ib"), std::runtime_error);
  for (const char* bad : {"shm alpha_us=1 beta_us_per_byte=2\n",
                          "shm alpha_us=1 beta_us_per_byte=x gamma_us_per_byte=1\n",
                          "shm alpha_us=-1 beta_us_per_byte=1 gamma_us_per_byte=1\n",
                          "shm alpha=1 beta_us_per_byte=1 gamma_us_per_byte=1\n",
                          "shm/tree alpha_us=1\n"}) {
    std::ofstream(path) << "# comment\n" << bad;
    EXPECT_THROW(readCalibrationFile(path, "shm"), std::runtime_error) << bad;
  }
  std::remove(path.c_str());
  EXPECT_THROW(readCalibrationFile(path, "shm"), std::runtime_error);
}

}  // namespace
}  // namespace coil_perf
