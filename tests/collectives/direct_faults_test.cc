// Faults inside the direct all-reduce algorithms (one-shot and slice through
// the shared window, one-shot through tcp's caller-driven path), each forced
// with COIL_ALGO: a peer that dies mid-call, an abort from another thread,
// ranks that disagree on COIL_ALGO. Every one must end in a clear error
// within seconds — never a hang or the 60 s timeout — and leave nothing in
// /dev/shm.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "harness/run_ranks.h"

namespace coil::test {
namespace {


struct Case {
  std::string transport;
  std::string algo;  // COIL_ALGO
  size_t count;      // floats per all-reduce
};

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.transport + "_" + info.param.algo + "_" + std::to_string(info.param.count);
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

const Case kCases[] = {
    {"shm", "allreduce:slice", size_t{1} << 24},  // 64 MiB: many pieces, rank 2 dies inside
    {"shm", "allreduce:oneshot", 1024},
    {"tcp", "allreduce:oneshot", 1024},
};

class DirectFaults : public ::testing::TestWithParam<Case> {
 protected:
  ScopedEnv algo_{"COIL_ALGO", GetParam().algo};
};

// All ranks call all-reduce in a loop; rank 2 dies 30 ms in, in the middle
// of some call (large: while the pieces stream). The survivors' call that
// needs it fails with coilRemoteError promptly.
TEST_P(DirectFaults, PeerDeathIsARemoteErrorWithinSeconds) {
  const int n = 3;
  const Case c = GetParam();
  runRanksRaw({n, Launch::Processes, c.transport}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, n, rank, 60000);
    ASSERT_NE(comm, nullptr);
    std::vector<float> buf(c.count, 1.0f);
    // One good call first: the algorithm works, and every rank is set up.
    ASSERT_EQ(coilAllReduce(buf.data(), buf.data(), c.count, coilFloat, coilSum, comm, nullptr),
              coilSuccess)
        << coilGetLastError(comm);
    EXPECT_EQ(buf[0], 3.0f);
    if (rank == 2) {
      std::thread killer([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        _exit(0);  // like a crash: no cleanup, no goodbye
      });
      for (;;) coilAllReduce(buf.data(), buf.data(), c.count, coilFloat, coilSum, comm, nullptr);
    }
    coilResult_t rc = coilSuccess;
    double s = 0;
    for (int call = 0; call < 1000000 && rc == coilSuccess; ++call) {
      auto t0 = Clock::now();
      rc = coilAllReduce(buf.data(), buf.data(), c.count, coilFloat, coilSum, comm, nullptr);
      s = secondsSince(t0);
    }
    EXPECT_EQ(rc, coilRemoteError) << coilGetLastError(comm);
    EXPECT_LT(s, 10.0) << "seconds in the failing call";
    std::string msg = coilGetLastError(comm);
    EXPECT_NE(msg.find("rank"), std::string::npos) << msg;
    coilResult_t async = coilSuccess;
    coilCommGetAsyncError(comm, &async);
    EXPECT_EQ(async, coilRemoteError);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

// Rank 0 waits in the forced algorithm for rank 1, which never comes; an
// abort from another thread ends the wait within 100 ms. Rank 1 then calls
// and fails fast instead of waiting for a dead peer.
TEST_P(DirectFaults, AbortUnblocksWithin100ms) {
  const Case c = GetParam();
  const size_t count = std::min<size_t>(c.count, 1u << 18);
  std::atomic<bool> rank0Done{false};
  runRanksRaw({2, Launch::Threads, c.transport}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, 2, rank, 60000);
    ASSERT_NE(comm, nullptr);
    std::vector<float> buf(count, 1.0f);
    if (rank == 0) {
      const InterruptedCall c = callInterruptedAfter(
          200, [&] { EXPECT_EQ(coilCommAbort(comm), coilSuccess); },
          [&] {
            return coilAllReduce(buf.data(), buf.data(), count, coilFloat, coilSum, comm, nullptr);
          });
      EXPECT_NE(c.result, coilSuccess);
      EXPECT_LT(c.msAfterInterrupt, 100.0) << "ms from abort to return";
      rank0Done = true;  // comm is freed by the abort
    } else {
      while (!rank0Done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      // Over tcp, rank 0's message may have left before the abort: then the
      // first call completes (correctly), and the next one fails. Over the
      // window, an aborted rank fails its peers' next wait at once.
      coilResult_t rc = coilSuccess;
      for (int call = 0; call < 2 && rc == coilSuccess; ++call) {
        auto t0 = Clock::now();
        rc = coilAllReduce(buf.data(), buf.data(), count, coilFloat, coilSum, comm, nullptr);
        EXPECT_LT(secondsSince(t0), 5.0);
        if (c.transport == "shm") {
          EXPECT_NE(rc, coilSuccess) << "the window reports a broken peer";
        }
      }
      EXPECT_EQ(rc, coilRemoteError) << coilGetLastError(comm);
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Forced, DirectFaults, ::testing::ValuesIn(kCases), caseName);

// Ranks that force different algorithms would run schedules that do not
// meet: the communicator refuses to start, naming both values.
TEST(DirectMismatch, DifferentCoilAlgoOnTheRanksIsNamed) {
  runRanksRaw({2, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    ScopedEnv algo("COIL_ALGO", rank == 0 ? "allreduce:oneshot" : "allreduce:slice");
    coilConfig_t config = COIL_CONFIG_INITIALIZER;
    config.timeoutMs = 20000;
    coilComm_t comm = nullptr;
    auto t0 = Clock::now();
    coilResult_t rc = coilCommInitRankConfig(&comm, 2, id, rank, &config);
    EXPECT_EQ(rc, coilInvalidUsage);
    EXPECT_LT(secondsSince(t0), 10.0);
    std::string msg = coilGetLastError(comm);
    EXPECT_NE(msg.find("COIL_ALGO differs between ranks"), std::string::npos) << msg;
    EXPECT_NE(msg.find("allreduce:oneshot"), std::string::npos) << msg;
    EXPECT_NE(msg.find("allreduce:slice"), std::string::npos) << msg;
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

// Ranks whose cost models differ (here: one rank's COIL_TUNE makes slice
// ruinously dear) still choose alike, because they all use rank 0's
// parameters; a choice that differed would fail or hang this all-reduce.
TEST(DirectMismatch, DifferentTuningOnTheRanksStillAgrees) {
  runRanksRaw({2, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    ScopedEnv tune("COIL_TUNE", rank == 0 ? "window/oneshot:alpha=1000000"
                                          : "window/slice:alpha=1000000");
    coilComm_t comm = initWithTimeout(id, 2, rank, 20000);
    ASSERT_NE(comm, nullptr);
    for (size_t count : {size_t{1}, size_t{1000}, size_t{100003}}) {
      std::vector<float> x(count);
      for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>((i % 97) + rank);
      ASSERT_EQ(coilAllReduce(x.data(), x.data(), count, coilFloat, coilSum, comm, nullptr),
                coilSuccess) << coilGetLastError(comm);
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(x[i], static_cast<float>(2 * (i % 97) + 1)) << "count " << count << " at " << i;
    }
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

// After every test — including the killed and aborted ranks — nothing coil
// created may remain in /dev/shm (the window's segments included).
[[maybe_unused]] auto* const kNoShmLeftBehind =
    ::testing::AddGlobalTestEnvironment(newShmLeakCheck());

}  // namespace
}  // namespace coil::test
