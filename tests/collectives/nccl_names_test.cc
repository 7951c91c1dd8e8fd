// The NCCL names coil.h adds for ported programs: the version scheme,
// coilBcast, coilMaxRedOp, the v3 config fields (netName picks the
// transport), coilCommInitRankScalable, coilCommShrink and
// coilGroupSimulateEnd. Values are checked against sums computed here;
// rank counts 3 and 5, as threads and as processes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harness/run_ranks.h"

namespace coil::test {
namespace {

constexpr int64_t kTimeoutMs = 20000;

std::string lastError(coilComm_t comm = nullptr) { return coilGetLastError(comm); }

TEST(Version, FollowsNcclsScheme) {
  static_assert(COIL_VERSION(2, 28, 0) == 22800);
  static_assert(COIL_VERSION(2, 8, 4) == 2804);  // NCCL's pre-2.9 encoding
  static_assert(COIL_VERSION_CODE == COIL_VERSION(COIL_MAJOR, COIL_MINOR, COIL_PATCH));
  // What ported code writes, after the sed: the modern branch must be taken.
#if COIL_VERSION_CODE >= COIL_VERSION(2, 19, 0)
  const bool modern = true;
#else
  const bool modern = false;
#endif
  EXPECT_TRUE(modern);
  EXPECT_GT(COIL_VERSION_CODE, COIL_VERSION(2, 8, 99));
  int v = 0;
  ASSERT_EQ(coilGetVersion(&v), coilSuccess);
  EXPECT_EQ(v, COIL_VERSION_CODE);
  EXPECT_EQ(v / 10000, COIL_MAJOR);
  EXPECT_EQ(v / 100 % 100, COIL_MINOR);
  EXPECT_EQ(v % 100, COIL_PATCH);
}

TEST(MaxRedOp, IsTheEnumsEndAndNotAnOp) {
  EXPECT_EQ(static_cast<int64_t>(coilMaxRedOp), INT32_MAX);
  EXPECT_EQ(sizeof(coilRedOp_t), sizeof(int));
  runRanks({3, Launch::Threads, "shm"}, [](coilComm_t comm, int) {
    int x = 1, y = 0;
    EXPECT_EQ(coilAllReduce(&x, &y, 1, coilInt32, coilMaxRedOp, comm, nullptr),
              coilInvalidArgument);
    EXPECT_NE(lastError(comm).find("invalid reduction op"), std::string::npos) << lastError(comm);
  });
}

class Ranks : public ::testing::TestWithParam<std::tuple<int, Launch>> {
 protected:
  RankSetup setup(const char* transport = "shm") const {
    return {std::get<0>(GetParam()), std::get<1>(GetParam()), transport};
  }
  int n() const { return std::get<0>(GetParam()); }
};

TEST_P(Ranks, BcastIsInPlaceBroadcast) {
  const int n = this->n();
  runRanks(setup(), [n](coilComm_t comm, int rank) {
    for (int root = 0; root < n; ++root) {
      std::vector<double> buf(1000);
      for (size_t i = 0; i < buf.size(); ++i)
        buf[i] = rank == root ? root * 1000.0 + static_cast<double>(i) : -1.0;
      ASSERT_EQ(coilBcast(buf.data(), buf.size(), coilDouble, root, comm, nullptr), coilSuccess)
          << lastError(comm);
      for (size_t i = 0; i < buf.size(); ++i)
        ASSERT_EQ(buf[i], root * 1000.0 + static_cast<double>(i)) << "root " << root;
    }
    EXPECT_EQ(coilBcast(nullptr, 0, coilFloat, n, comm, nullptr), coilInvalidArgument);
    EXPECT_NE(lastError(comm).find("coilBcast: root"), std::string::npos) << lastError(comm);
  });
}

TEST_P(Ranks, ScalableInitWithSeveralIds) {
  const int n = this->n();
  // Two ids, as NCCL programs make them on two ranks: the harness's, and
  // one made here. The ranks meet at the first. The second is an id for a
  // fixed root address (COIL_COMM_ID), so no root thread runs for it in this
  // process: a second root thread here, still polling (and, with a
  // deadline, logging its timeout) while the harness forks the ranks, is
  // what hung a forked rank under ASan in 2 of ~10 sanitizer runs (rank 1
  // never reached the first root; the others timed out waiting for it).
  coilUniqueId second;
  {
    ScopedEnv fixedRoot("COIL_COMM_ID", "127.0.0.1:9");
    ASSERT_EQ(coilGetUniqueId(&second), coilSuccess);
  }
  runRanksRaw(setup(), [&](const coilUniqueId& first, int rank) {
    coilUniqueId ids[2] = {first, second};
    coilConfig_t config = COIL_CONFIG_INITIALIZER;
    config.timeoutMs = kTimeoutMs;
    coilComm_t comm = nullptr;
    ASSERT_EQ(coilCommInitRankScalable(&comm, n, rank, 2, ids, &config), coilSuccess)
        << lastError();
    int64_t v = int64_t{1} << rank, sum = 0;
    ASSERT_EQ(coilAllReduce(&v, &sum, 1, coilInt64, coilSum, comm, nullptr), coilSuccess);
    EXPECT_EQ(sum, (int64_t{1} << n) - 1);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
  coilComm_t comm = nullptr;
  EXPECT_EQ(coilCommInitRankScalable(&comm, n, 0, 0, &second, nullptr), coilInvalidArgument);
  EXPECT_NE(lastError().find("nId must be >= 1"), std::string::npos) << lastError();
  EXPECT_EQ(coilCommInitRankScalable(&comm, n, 0, 1, nullptr, nullptr), coilInvalidArgument);
}

TEST_P(Ranks, ShrinkExcludesListedRanks) {
  const int n = this->n();
  // Exclude rank 1 and the last rank; the others form a communicator of
  // n - 2 ranks, in the parent's order.
  const std::vector<int> excluded = {n - 1, 1};
  runRanks(setup(), [&](coilComm_t parent, int rank) {
    if (rank == 1 || rank == n - 1) return;  // an excluded rank does not call it
    std::vector<int> list = excluded;
    coilComm_t child = nullptr;
    ASSERT_EQ(coilCommShrink(parent, list.data(), 2, &child, nullptr, COIL_SHRINK_DEFAULT),
              coilSuccess)
        << lastError(parent);
    int size = 0, childRank = -1;
    ASSERT_EQ(coilCommCount(child, &size), coilSuccess);
    ASSERT_EQ(coilCommUserRank(child, &childRank), coilSuccess);
    EXPECT_EQ(size, n - 2);
    EXPECT_EQ(childRank, rank == 0 ? 0 : rank - 1);
    std::vector<float> x(4096, static_cast<float>(rank)), sum(4096);
    ASSERT_EQ(coilAllReduce(x.data(), sum.data(), x.size(), coilFloat, coilSum, child, nullptr),
              coilSuccess)
        << lastError(child);
    float want = 0;
    for (int r = 0; r < n; ++r)
      if (r != 1 && r != n - 1) want += static_cast<float>(r);
    for (float s : sum) ASSERT_EQ(s, want);
    EXPECT_EQ(coilCommDestroy(child), coilSuccess);
  });
}

TEST_P(Ranks, ShrinkRejectsBadLists) {
  const int n = this->n();
  runRanks(setup(), [n](coilComm_t parent, int rank) {
    coilComm_t child = nullptr;
    int self[1] = {rank};
    EXPECT_EQ(coilCommShrink(parent, self, 1, &child, nullptr, COIL_SHRINK_DEFAULT),
              coilInvalidArgument);
    EXPECT_NE(lastError(parent).find("names this rank"), std::string::npos) << lastError(parent);
    int twice[2] = {(rank + 1) % n, (rank + 1) % n};
    EXPECT_EQ(coilCommShrink(parent, twice, 2, &child, nullptr, COIL_SHRINK_DEFAULT),
              coilInvalidArgument);
    int out[1] = {n};
    EXPECT_EQ(coilCommShrink(parent, out, 1, &child, nullptr, COIL_SHRINK_DEFAULT),
              coilInvalidArgument);
    EXPECT_EQ(coilCommShrink(parent, nullptr, 0, &child, nullptr, 7), coilInvalidArgument);
    EXPECT_NE(lastError(parent).find("shrinkFlags"), std::string::npos) << lastError(parent);
    EXPECT_EQ(child, nullptr);
    // Nothing excluded: a copy of the parent, which still works too.
    ASSERT_EQ(coilCommShrink(parent, nullptr, 0, &child, nullptr, COIL_SHRINK_DEFAULT),
              coilSuccess)
        << lastError(parent);
    int v = rank + 1, a = 0, b = 0;
    ASSERT_EQ(coilAllReduce(&v, &a, 1, coilInt32, coilSum, child, nullptr), coilSuccess);
    ASSERT_EQ(coilAllReduce(&v, &b, 1, coilInt32, coilSum, parent, nullptr), coilSuccess);
    EXPECT_EQ(a, n * (n + 1) / 2);
    EXPECT_EQ(b, n * (n + 1) / 2);
    EXPECT_EQ(coilCommDestroy(child), coilSuccess);
  });
}

// netName picks the transport: "Socket" (NCCL's name) is tcp even where shm
// would be chosen, which shows in the result of a wrong name too.
TEST_P(Ranks, NetNameSelectsTheTransport) {
  const int n = this->n();
  runRanksRaw(setup(""), [n](const coilUniqueId& id, int rank) {
    coilConfig_t config = COIL_CONFIG_INITIALIZER;
    config.timeoutMs = kTimeoutMs;
    config.netName = "Socket";
    config.cgaClusterSize = 4;
    config.minCTAs = 1;
    config.maxCTAs = 16;
    coilComm_t comm = nullptr;
    ASSERT_EQ(coilCommInitRankConfig(&comm, n, id, rank, &config), coilSuccess) << lastError();
    std::vector<int32_t> x(10000, rank + 1), sum(10000);
    ASSERT_EQ(coilAllReduce(x.data(), sum.data(), x.size(), coilInt32, coilSum, comm, nullptr),
              coilSuccess);
    for (int32_t s : sum) ASSERT_EQ(s, n * (n + 1) / 2);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(, Ranks,
                         ::testing::Combine(::testing::Values(3, 5),
                                            ::testing::Values(Launch::Threads, Launch::Processes)),
                         [](const auto& info) {
                           return std::string(std::get<1>(info.param) == Launch::Threads
                                                  ? "threads_"
                                                  : "procs_") +
                                  std::to_string(std::get<0>(info.param));
                         });

// COIL_SHRINK_ABORT after a rank died: the survivors' parent is broken (its
// connections cannot carry the new rendezvous), yet they meet again, with
// the dead rank anywhere (rank 0 included, whose successor then hosts).
struct AbortCase {
  int nranks;
  int victim;
  const char* transport;
};

class ShrinkAbort : public ::testing::TestWithParam<AbortCase> {};

TEST_P(ShrinkAbort, SurvivorsOfADeadRankFormANewCommunicator) {
  const AbortCase p = GetParam();
  runRanksRaw({p.nranks, Launch::Processes, p.transport}, [&](const coilUniqueId& id, int rank) {
    coilComm_t parent = initWithTimeout(id, p.nranks, rank, 10000);
    ASSERT_NE(parent, nullptr);
    // The victim dies without a word once its part of a first all-reduce is
    // done: the others may or may not have finished theirs, but the next
    // one cannot complete anywhere.
    int one = 1, all = 0;
    const coilResult_t first = coilAllReduce(&one, &all, 1, coilInt32, coilSum, parent, nullptr);
    if (rank == p.victim) _exit(0);
    if (first == coilSuccess) {
      EXPECT_EQ(all, p.nranks);
      std::vector<float> x(1 << 16, 1.0f);
      EXPECT_NE(coilAllReduce(x.data(), x.data(), x.size(), coilFloat, coilSum, parent, nullptr),
                coilSuccess);
    }
    int excluded[1] = {p.victim};
    coilComm_t child = nullptr;
    const auto t0 = Clock::now();
    ASSERT_EQ(coilCommShrink(parent, excluded, 1, &child, nullptr, COIL_SHRINK_ABORT), coilSuccess)
        << lastError(parent);
    int size = 0, childRank = -1;
    ASSERT_EQ(coilCommCount(child, &size), coilSuccess);
    ASSERT_EQ(coilCommUserRank(child, &childRank), coilSuccess);
    EXPECT_EQ(size, p.nranks - 1);
    EXPECT_EQ(childRank, rank < p.victim ? rank : rank - 1);
    std::vector<int64_t> v(10000, rank), sum(10000);
    ASSERT_EQ(coilAllReduce(v.data(), sum.data(), v.size(), coilInt64, coilSum, child, nullptr),
              coilSuccess)
        << lastError(child);
    EXPECT_EQ(sum[9999], int64_t{p.nranks} * (p.nranks - 1) / 2 - p.victim);
    EXPECT_LT(secondsSince(t0), 10.0);
    // The parent stays revoked: it fails at once, and is still destroyed normally.
    EXPECT_NE(coilAllReduce(&one, &all, 1, coilInt32, coilSum, parent, nullptr), coilSuccess);
    EXPECT_EQ(coilCommDestroy(child), coilSuccess);
    EXPECT_EQ(coilCommDestroy(parent), coilSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(, ShrinkAbort,
                         ::testing::Values(AbortCase{3, 0, "shm"}, AbortCase{3, 2, "tcp"},
                                           AbortCase{5, 2, "tcp"}, AbortCase{5, 0, "shm"}),
                         [](const auto& info) {
                           return std::string(info.param.transport) + "_" +
                                  std::to_string(info.param.nranks) + "_victim" +
                                  std::to_string(info.param.victim);
                         });

TEST(Config, V3FieldsAreChecked) {
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  coilComm_t comm = nullptr;
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.netName = "nvlink";
  EXPECT_EQ(coilCommInitRankConfig(&comm, 1, id, 0, &config), coilInvalidArgument);
  EXPECT_NE(lastError().find("netName 'nvlink'"), std::string::npos) << lastError();
  config = COIL_CONFIG_INITIALIZER;
  config.minCTAs = 8;
  config.maxCTAs = 4;
  EXPECT_EQ(coilCommInitRankConfig(&comm, 1, id, 0, &config), coilInvalidArgument);
  EXPECT_NE(lastError().find("minCTAs"), std::string::npos) << lastError();
  config = COIL_CONFIG_INITIALIZER;
  config.cgaClusterSize = 9;
  EXPECT_EQ(coilCommInitRankConfig(&comm, 1, id, 0, &config), coilInvalidArgument);
  config = COIL_CONFIG_INITIALIZER;
  config.blocking = 2;
  EXPECT_EQ(coilCommInitRankConfig(&comm, 1, id, 0, &config), coilInvalidArgument);
  EXPECT_EQ(comm, nullptr);
}

// An older caller's struct (version 2, without the v3 fields) is still read.
TEST(Config, Version2StructStillWorks) {
  struct V2 {
    size_t size;
    unsigned magic, version;
    int blocking;
    int64_t timeoutMs;
    const char* commName;
    int splitShare;
  } v2{sizeof(V2), COIL_CONFIG_MAGIC, 2, COIL_CONFIG_UNDEF_INT, kTimeoutMs, "v2", 0};
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  coilComm_t comm = nullptr;
  ASSERT_EQ(coilCommInitRankConfig(&comm, 1, id, 0, reinterpret_cast<coilConfig_t*>(&v2)),
            coilSuccess)
      << lastError();
  EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
}

// The estimate is the cost model's: positive, growing with the size, and
// nothing runs (the other ranks never call; a run would time out).
TEST(GroupSimulateEnd, EstimatesWithoutRunning) {
  runRanks({3, Launch::Threads, "shm"}, [](coilComm_t comm, int rank) {
    std::vector<float> small(1024, 1.0f), big(1 << 22, 1.0f);
    coilSimInfo_t a = COIL_SIM_INFO_INITIALIZER, b = COIL_SIM_INFO_INITIALIZER;
    ASSERT_EQ(coilGroupStart(), coilSuccess);
    ASSERT_EQ(coilAllReduce(small.data(), small.data(), small.size(), coilFloat, coilSum, comm,
                            nullptr),
              coilSuccess);
    ASSERT_EQ(coilGroupSimulateEnd(&a), coilSuccess) << lastError();
    ASSERT_EQ(coilGroupStart(), coilSuccess);
    ASSERT_EQ(coilAllReduce(big.data(), big.data(), big.size(), coilFloat, coilSum, comm, nullptr),
              coilSuccess);
    ASSERT_EQ(coilSend(big.data(), 1000, coilFloat, (rank + 1) % 3, comm, nullptr), coilSuccess);
    ASSERT_EQ(coilGroupSimulateEnd(&b), coilSuccess) << lastError();
    EXPECT_GT(a.estimatedTime, 0.0f);
    EXPECT_TRUE(std::isfinite(b.estimatedTime));
    EXPECT_GT(b.estimatedTime, 10 * a.estimatedTime);
    EXPECT_EQ(small[0], 1.0f);  // not run
    EXPECT_EQ(big[0], 1.0f);
    // Nothing was left queued: a real all-reduce now gives the real sum.
    ASSERT_EQ(coilAllReduce(small.data(), small.data(), small.size(), coilFloat, coilSum, comm,
                            nullptr),
              coilSuccess);
    EXPECT_EQ(small[0], 3.0f);
  });
  EXPECT_EQ(coilGroupSimulateEnd(nullptr), coilInvalidUsage);  // no group
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  coilSimInfo_t bad = COIL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  EXPECT_EQ(coilGroupSimulateEnd(&bad), coilInvalidArgument);
  EXPECT_NE(lastError().find("COIL_SIM_INFO_INITIALIZER"), std::string::npos) << lastError();
  EXPECT_EQ(coilGroupEnd(), coilSuccess);  // the bad call left the group open
}

[[maybe_unused]] auto* const kNoShmLeftBehind =
    ::testing::AddGlobalTestEnvironment(newShmLeakCheck());

}  // namespace
}  // namespace coil::test
