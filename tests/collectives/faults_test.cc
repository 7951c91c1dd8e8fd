// Bad input and faults: every one must end in a clear error code plus a
// message naming the problem — never a crash, a hang, or wrong data.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "harness/run_ranks.h"
#include "harness/wait_or_kill.h"
#include "launch/quiet_threads.h"

namespace coil::test {
namespace {

// The timeout TimeoutWhenAPeerNeverCalls gives its comm: 500 ms, or
// COIL_TEST_SHORT_TIMEOUT_MS. It bounds init as well as the collective, and
// under emulation (the rxe suite's guest without KVM) setting up ib's queue
// pairs alone can take longer than 500 ms.
int64_t shortTimeoutMs() {
  const char* v = std::getenv("COIL_TEST_SHORT_TIMEOUT_MS");
  return v != nullptr && std::atoll(v) > 0 ? std::atoll(v) : 500;
}

TEST(Api, VersionAndErrorStrings) {
  int v = 0;
  ASSERT_EQ(coilGetVersion(&v), coilSuccess);
  EXPECT_EQ(v, COIL_VERSION_CODE);
  EXPECT_EQ(coilGetVersion(nullptr), coilInvalidArgument);
  EXPECT_NE(std::string(coilGetLastError(nullptr)).find("version is NULL"), std::string::npos);
  for (int r = 0; r < coilNumResults; ++r)
    EXPECT_GT(std::strlen(coilGetErrorString(static_cast<coilResult_t>(r))), 0u);
}

TEST(Api, InvalidInitArguments) {
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  coilComm_t comm = nullptr;
  EXPECT_EQ(coilCommInitRank(&comm, 0, id, 0), coilInvalidArgument);
  EXPECT_NE(std::string(coilGetLastError(nullptr)).find("nranks"), std::string::npos);
  EXPECT_EQ(coilCommInitRank(&comm, 2, id, 2), coilInvalidArgument);
  EXPECT_NE(std::string(coilGetLastError(nullptr)).find("rank 2 is out of range"), std::string::npos);
  EXPECT_EQ(coilCommInitRank(nullptr, 1, id, 0), coilInvalidArgument);
  coilUniqueId garbage;
  std::memset(&garbage, 0x5A, sizeof garbage);
  EXPECT_EQ(coilCommInitRank(&comm, 1, garbage, 0), coilInvalidArgument);
  coilConfig_t bad = COIL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT_EQ(coilCommInitRankConfig(&comm, 1, id, 0, &bad), coilInvalidArgument);
  EXPECT_NE(std::string(coilGetLastError(nullptr)).find("COIL_CONFIG_INITIALIZER"), std::string::npos);
  EXPECT_EQ(comm, nullptr);
  // The id was never used by a rank; its root times out on its own.
}

TEST(Api, InvalidCollectiveArguments) {
  runRanks({2, Launch::Threads, "shm"}, [](coilComm_t comm, int) {
    float a[8] = {}, b[8] = {};
    auto expectBad = [&](coilResult_t rc, const char* needle) {
      EXPECT_EQ(rc, coilInvalidArgument);
      EXPECT_NE(std::string(coilGetLastError(comm)).find(needle), std::string::npos)
          << coilGetLastError(comm);
    };
    EXPECT_EQ(coilAllReduce(a, b, 8, coilFloat, coilSum, nullptr, nullptr), coilInvalidArgument);
    EXPECT_NE(std::string(coilGetLastError(nullptr)).find("comm is NULL"), std::string::npos);
    expectBad(coilAllReduce(a, b, 8, static_cast<coilDataType_t>(42), coilSum, comm, nullptr),
              "invalid datatype 42");
    expectBad(coilAllReduce(a, b, 8, coilFloat, static_cast<coilRedOp_t>(-1), comm, nullptr),
              "invalid reduction op -1");
    expectBad(coilAllReduce(nullptr, b, 8, coilFloat, coilSum, comm, nullptr), "sendbuff is NULL");
    expectBad(coilAllReduce(a, nullptr, 8, coilFloat, coilSum, comm, nullptr), "recvbuff is NULL");
    expectBad(coilAllReduce(a, a + 1, 4, coilFloat, coilSum, comm, nullptr), "overlap");
    int fakeStream = 0;
    expectBad(coilAllReduce(a, b, 8, coilFloat, coilSum, comm, &fakeStream), "stream");
    // None of that broke the communicator: a valid call still works.
    for (int i = 0; i < 8; ++i) a[i] = static_cast<float>(i);
    ASSERT_EQ(coilAllReduce(a, b, 8, coilFloat, coilSum, comm, nullptr), coilSuccess);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(b[i], 2.0f * i);
    // count == 0 with NULL buffers is a successful no-op.
    EXPECT_EQ(coilAllReduce(nullptr, nullptr, 0, coilFloat, coilSum, comm, nullptr), coilSuccess);
    int n = 0, r = -1;
    EXPECT_EQ(coilCommCount(comm, &n), coilSuccess);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(coilCommUserRank(comm, &r), coilSuccess);
    EXPECT_TRUE(r == 0 || r == 1);
  });
}

// Small (a one-shot) and large (several pieces: over tcp, the ring on the
// caller-driven paths, whose first piece leaves before the wait).
TEST(Faults, TimeoutWhenAPeerNeverCalls) {
  for (const std::string& transport : testedTransports())
  for (const size_t count : {size_t{4}, size_t{1} << 20}) {
    SCOPED_TRACE(transport + " count " + std::to_string(count));
    std::atomic<bool> rank0Done{false};
    const int64_t timeoutMs = shortTimeoutMs();
    runRanksRaw({2, Launch::Threads, transport}, [&](const coilUniqueId& id, int rank) {
      coilComm_t comm = initWithTimeout(id, 2, rank, timeoutMs);
      ASSERT_NE(comm, nullptr);
      if (rank == 0) {
        std::vector<float> x(count, 1.0f);
        auto t0 = Clock::now();
        EXPECT_EQ(coilAllReduce(x.data(), x.data(), count, coilFloat, coilSum, comm, nullptr),
                  coilTimeout);
        double s = secondsSince(t0);
        EXPECT_GE(s, 0.9 * timeoutMs / 1000.0);
        EXPECT_LT(s, timeoutMs / 1000.0 + 4.5);
        std::string msg = coilGetLastError(comm);
        EXPECT_NE(msg.find("timed out after " + std::to_string(timeoutMs) + " ms"),
                  std::string::npos)
            << msg;
        EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
        coilResult_t async = coilSuccess;
        EXPECT_EQ(coilCommGetAsyncError(comm, &async), coilSuccess);
        EXPECT_EQ(async, coilTimeout);
        rank0Done = true;
      } else {
        while (!rank0Done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    });
  }
}

// Two hosts (ranks 0 and 1 on one, shm between them; rank 2 on the other,
// tcp across); rank 2 never calls. Every path of a call that joins the
// two kinds of links ends at the deadline with an error naming a rank: the
// one-shot (each link its own path), and the flat ring's and the
// hierarchical all-reduce's pieces (express sockets across, FIFOs inside).
TEST(Faults, TimeoutAcrossHostsWhenAPeerNeverCalls) {
  const std::vector<std::string> transports = testedTransports(Launch::Processes);
  if (std::find(transports.begin(), transports.end(), kTwoHosts) == transports.end())
    GTEST_SKIP() << "COIL_TEST_TRANSPORTS names the transports, two hosts not among them";
  const int n = 3;
  void* shared = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* finished = new (shared) std::atomic<int>(0);  // ranks 0 and 1 done
  const int64_t timeoutMs = shortTimeoutMs();
  for (const char* algo : {"allreduce:oneshot", "allreduce:ring", "allreduce:hier"}) {
    SCOPED_TRACE(algo);
    ScopedEnv force("COIL_ALGO", algo);
    finished->store(0);
    const size_t count = std::string(algo) == "allreduce:oneshot" ? 1000 : size_t{1} << 20;
    runRanksRaw({n, Launch::Processes, kTwoHosts}, [&](const coilUniqueId& id, int rank) {
      coilComm_t comm = initWithTimeout(id, n, rank, timeoutMs);
      ASSERT_NE(comm, nullptr);
      if (rank == 2) {
        const auto deadline = Clock::now() + std::chrono::seconds(60);
        while (finished->load() < 2 && Clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } else {
        std::vector<float> x(count, 1.0f);
        const auto t0 = Clock::now();
        const coilResult_t rc =
            coilAllReduce(x.data(), x.data(), count, coilFloat, coilSum, comm, nullptr);
        const double s = secondsSince(t0);
        const std::string msg = coilGetLastError(comm);
        // Or hear that the other gave up first (its failure notice).
        EXPECT_TRUE(rc == coilTimeout || rc == coilRemoteError) << rc << " " << msg;
        EXPECT_LT(s, timeoutMs / 1000.0 + 4.5);
        EXPECT_NE(msg.find("rank"), std::string::npos) << msg;
        finished->fetch_add(1);
      }
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    });
  }
  munmap(shared, sizeof(std::atomic<int>));
}

TEST(Faults, AbortFromAnotherThreadUnblocksWithin100ms) {
  for (const std::string& transport : testedTransports()) {
  SCOPED_TRACE(transport);
  std::atomic<bool> rank0Done{false};
  runRanksRaw({2, Launch::Threads, transport}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, 2, rank, 60000);
    ASSERT_NE(comm, nullptr);
    if (rank == 0) {
      float x[4] = {1, 1, 1, 1};
      const InterruptedCall c = callInterruptedAfter(
          200, [&] { EXPECT_EQ(coilCommAbort(comm), coilSuccess); },
          [&] { return coilAllReduce(x, x, 4, coilFloat, coilSum, comm, nullptr); });
      EXPECT_NE(c.result, coilSuccess);
      EXPECT_LT(c.msAfterInterrupt, 100.0) << "ms from abort to return";
      rank0Done = true;  // comm is freed by the abort
    } else {
      while (!rank0Done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      float y[4] = {2, 2, 2, 2};
      // The peer is gone: this rank fails fast instead of hanging. Where
      // rank 0's data had left before its abort (tcp's and ib's one-shot
      // message sits in this rank's socket or slot), the call may also
      // complete, with the right sum: never with anything else.
      auto t0 = Clock::now();
      const coilResult_t rc = coilAllReduce(y, y, 4, coilFloat, coilSum, comm, nullptr);
      EXPECT_TRUE(rc == coilRemoteError || (rc == coilSuccess && y[0] == 3 && y[3] == 3))
          << coilGetErrorString(rc) << ", y[0] = " << y[0];
      EXPECT_LT(secondsSince(t0), 5.0);
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    }
  });
  }
}

// Revoke, unlike abort, leaves the handle valid: the blocked call returns
// within 100 ms, later calls fail at once naming the revoke, the peer fails
// fast, and destroy frees it.
class Revoke : public ::testing::TestWithParam<std::string> {};

// An all-reduce of x[4] that another thread revokes after 200 ms; `revoked`
// is set once coilCommRevoke returned.
InterruptedCall allReduceRevokedAfter200Ms(coilComm_t comm, float* x, std::atomic<bool>& revoked) {
  return callInterruptedAfter(
      200,
      [&] {
        EXPECT_EQ(coilCommRevoke(comm), coilSuccess);
        revoked = true;
      },
      [&] { return coilAllReduce(x, x, 4, coilFloat, coilSum, comm, nullptr); });
}

TEST_P(Revoke, UnblocksAndKeepsTheHandleUntilDestroy) {
  std::atomic<bool> revoked{false};
  runRanksRaw({2, Launch::Threads, GetParam()}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, 2, rank, 60000);
    ASSERT_NE(comm, nullptr);
    if (rank == 0) {
      float x[4] = {1, 1, 1, 1};
      const InterruptedCall c = allReduceRevokedAfter200Ms(comm, x, revoked);
      EXPECT_NE(c.result, coilSuccess);
      EXPECT_LT(c.msAfterInterrupt, 100.0) << "ms from revoke to return";
      // The handle is still valid: its error, its count, and a clear refusal.
      int count = 0;
      EXPECT_EQ(coilCommCount(comm, &count), coilSuccess);
      EXPECT_EQ(count, 2);
      EXPECT_EQ(coilAllReduce(x, x, 4, coilFloat, coilSum, comm, nullptr), coilInvalidUsage);
      EXPECT_NE(std::string(coilGetLastError(comm)).find("revoked"), std::string::npos)
          << coilGetLastError(comm);
      EXPECT_EQ(coilCommRevoke(comm), coilSuccess) << "revoking twice is harmless";
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    } else {
      while (!revoked) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      // Rank 0's input may already be on its way (tcp buffers it), so the
      // first call may still complete, with the right sum; the next fails.
      float y[4] = {};
      auto t0 = Clock::now();
      coilResult_t rc = coilSuccess;
      for (int call = 0; call < 2 && rc == coilSuccess; ++call) {
        rc = coilAllReduce(y, y, 4, coilFloat, coilSum, comm, nullptr);
        if (rc == coilSuccess) {  // only with rank 0's one input: 1 + 0
          EXPECT_EQ(call, 0);
          EXPECT_EQ(y[0], 1.0f);
        }
      }
      EXPECT_EQ(rc, coilRemoteError) << coilGetLastError(comm);
      EXPECT_LT(secondsSince(t0), 5.0);
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    }
  });
  EXPECT_EQ(coilCommRevoke(nullptr), coilInvalidArgument);
}

// A revoke that lands while the call polls, and the peer's data just after
// it: the call still fails. Rank 0 polls for a whole second (it looks at
// the abort flag only when it stops polling), and rank 1 calls as soon as
// the revoke returned; before the driver checked the flag after the
// algorithm, rank 0's call completed (a rare failure of the test above,
// under load, when the woken waiter ran only after rank 1 had posted).
TEST_P(Revoke, ACallWhoseDataArrivesAfterTheRevokeStillFails) {
  ScopedEnv spin("COIL_SPIN", "always"), spinUs("COIL_SPIN_US", "1000000");
  std::atomic<bool> revoked{false};
  runRanksRaw({2, Launch::Threads, GetParam()}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, 2, rank, 60000);
    ASSERT_NE(comm, nullptr);
    float x[4] = {1, 1, 1, 1};
    if (rank == 0) {
      const InterruptedCall c = allReduceRevokedAfter200Ms(comm, x, revoked);
      EXPECT_EQ(c.result, coilRemoteError) << coilGetLastError(comm);
      EXPECT_NE(std::string(coilGetLastError(comm)).find("aborted"), std::string::npos)
          << coilGetLastError(comm);
    } else {
      while (!revoked) std::this_thread::sleep_for(std::chrono::microseconds(100));
      (void)coilAllReduce(x, x, 4, coilFloat, coilSum, comm, nullptr);  // may fail or complete
    }
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, Revoke, ::testing::ValuesIn(testedTransports()));

// A rank process dies in the middle of a large all-reduce; every survivor
// must get coilRemoteError within seconds (not the 60 s timeout).
// `forkedChildLives`: the dying rank first forks a child that outlives it,
// as a trainer's data-loader workers or a checkpoint writer do. The child
// inherits every descriptor, the sockets to the peers included; as long as
// the child held them, no peer saw the connection close, and tcp's (and
// ib's liveness socket's) survivors waited for their timeout.
void peerDeath(const std::string& transport, bool forkedChildLives) {
  const int n = 3;
  // The ranks that returned from the first all-reduce, counted in memory the
  // forked ranks share. The dying rank waits for all of them: returning
  // from a collective does not mean the others have, and a rank that died
  // while another was still in the first call made that call fail there
  // (seen once over ib under emulation, the ranks 180 ms apart), which is
  // the right answer to a different question than this test asks.
  void* shared = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* returned = new (shared) std::atomic<int>(0);
  void* childShared = mmap(nullptr, sizeof(std::atomic<pid_t>), PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(childShared, MAP_FAILED);
  auto* child = new (childShared) std::atomic<pid_t>(0);
  runRanksRaw({n, Launch::Processes, transport}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, n, rank, 60000);
    ASSERT_NE(comm, nullptr);
    const size_t count = size_t{1} << 24;
    std::vector<float> buf(count, 1.0f);
    ASSERT_EQ(coilAllReduce(buf.data(), buf.data(), 1024, coilFloat, coilSum, comm, nullptr),
              coilSuccess);
    returned->fetch_add(1);
    if (rank == 2) {
      const auto deadline = Clock::now() + std::chrono::seconds(60);
      while (returned->load() < n && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_EQ(returned->load(), n) << "the other ranks did not return from the first all-reduce";
      if (forkedChildLives) {
        const pid_t pid = forkWhenQuiet();
        if (pid == 0) {
          // Only sleeps (coil's threads are not here): 30 s at most, ended
          // by the test long before.
          for (int i = 0; i < 300; ++i) usleep(100 * 1000);
          _exit(0);
        }
        ASSERT_GT(pid, 0);
        child->store(pid);
      }
      std::thread killer([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        _exit(0);  // like a crash: no cleanup, no goodbye
      });
      // Keep calling: a fast path may finish one call within the 30 ms.
      for (;;) coilAllReduce(buf.data(), buf.data(), count, coilFloat, coilSum, comm, nullptr);
    }
    coilResult_t rc = coilSuccess;
    double s = 0;
    for (int call = 0; call < 100000 && rc == coilSuccess; ++call) {
      auto t0 = Clock::now();
      rc = coilAllReduce(buf.data(), buf.data(), count, coilFloat, coilSum, comm, nullptr);
      s = secondsSince(t0);
    }
    EXPECT_EQ(rc, coilRemoteError) << coilGetLastError(comm);
    EXPECT_LT(s, 10.0);
    std::string msg = coilGetLastError(comm);
    EXPECT_NE(msg.find("rank"), std::string::npos) << msg;
    coilResult_t async = coilSuccess;
    coilCommGetAsyncError(comm, &async);
    EXPECT_EQ(async, coilRemoteError);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
  if (const pid_t pid = child->load(); pid > 0) kill(pid, SIGKILL);  // reparented: not ours to reap
  munmap(shared, sizeof(std::atomic<int>));
  munmap(childShared, sizeof(std::atomic<pid_t>));
}

class PeerDeath : public ::testing::TestWithParam<std::string> {};

TEST_P(PeerDeath, SurvivorsGetRemoteErrorPromptly) { peerDeath(GetParam(), false); }

TEST_P(PeerDeath, SurvivorsGetRemoteErrorPromptlyWhileItsForkedChildLives) {
  peerDeath(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerDeath, ::testing::ValuesIn(testedTransports(Launch::Processes)));

// A rank forks a child after init (a data-loader worker, a helper). The
// child inherits the communicator's handle but none of coil's threads, and
// over shm the very queues its parent uses. A call on the handle in the
// child must be refused with a message naming the fork, not run; and
// destroying the handle there must neither hang nor touch the parent's
// communicator, which goes on with the right values.
class ForkedChild : public ::testing::TestWithParam<std::string> {};

TEST_P(ForkedChild, IsRefusedItsParentsCommunicatorAndLeavesItWhole) {
  runRanks({2, Launch::Processes, GetParam()}, [](coilComm_t comm, int rank) {
    const size_t count = 4099;
    std::vector<float> x(count, static_cast<float>(rank + 1)), y(count, 0.0f);
    ASSERT_EQ(coilAllReduce(x.data(), y.data(), count, coilFloat, coilSum, comm, nullptr),
              coilSuccess)
        << coilGetLastError(comm);
    if (rank == 0) {
      std::fflush(nullptr);
      // Once coil's threads sleep: the child allocates (its error message),
      // and a sanitizer's allocator lock held at the fork would stay held.
      const pid_t pid = forkWhenQuiet();
      if (pid == 0) {
        const auto t0 = Clock::now();
        if (coilAllReduce(x.data(), y.data(), count, coilFloat, coilSum, comm, nullptr) !=
            coilInvalidUsage)
          _exit(2);
        const std::string why = coilGetLastError(comm);
        if (why.find("fork") == std::string::npos) {
          std::fprintf(stderr, "child: the message does not name the fork: %s\n", why.c_str());
          _exit(3);
        }
        if (coilCommDestroy(comm) != coilSuccess) _exit(4);
        _exit(secondsSince(t0) < 5.0 ? 0 : 5);
      }
      ASSERT_GT(pid, 0);
      EXPECT_EQ(waitOrKill(pid, Clock::now() + std::chrono::seconds(30)), 0)
          << "the forked child (2: its call was not refused with coilInvalidUsage, 3: the "
             "message does not say why, 4: its destroy failed, 5: it took 5 s or more, "
             "-1: it hung)";
    }
    for (int call = 0; call < 3; ++call) {
      std::fill(y.begin(), y.end(), 0.0f);
      ASSERT_EQ(coilAllReduce(x.data(), y.data(), count, coilFloat, coilSum, comm, nullptr),
                coilSuccess)
          << coilGetLastError(comm);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(y[i], 3.0f) << "element " << i;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, ForkedChild, ::testing::ValuesIn(testedTransports()));

// A crashed rank whose parent has not reaped it yet (a zombie) still has a
// pid; the survivors must see it as dead anyway.
TEST(Faults, UnreapedDeadPeerIsDetectedOverShm) {
  ScopedEnv transport("COIL_TRANSPORT", "shm");
  ScopedEnv ifname("COIL_SOCKET_IFNAME", "lo");
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  std::fflush(nullptr);
  pid_t pids[3];
  for (int r = 0; r < 3; ++r) {
    pids[r] = forkWhenQuiet();
    ASSERT_GE(pids[r], 0);
    if (pids[r] != 0) {
      noteForkedRank(pids[r]);
      continue;
    }
    coilConfig_t config = COIL_CONFIG_INITIALIZER;
    config.timeoutMs = 30000;
    coilComm_t comm = nullptr;
    if (coilCommInitRankConfig(&comm, 3, id, r, &config) != coilSuccess) _exit(10);
    std::vector<float> x(1 << 16, 1.0f);
    if (coilAllReduce(x.data(), x.data(), x.size(), coilFloat, coilSum, comm, nullptr) != coilSuccess)
      _exit(11);
    if (r == 2) kill(getpid(), SIGKILL);
    usleep(200 * 1000);
    auto t0 = Clock::now();
    coilResult_t rc = coilAllReduce(x.data(), x.data(), x.size(), coilFloat, coilSum, comm, nullptr);
    _exit(rc == coilRemoteError && secondsSince(t0) < 10.0 ? 0 : 12);
  }
  // Reap the survivors first: rank 2 stays a zombie meanwhile.
  for (int r = 0; r < 2; ++r) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[r], &status, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << r << " status " << status << " (12: no prompt coilRemoteError)";
  }
  waitpid(pids[2], nullptr, 0);
}

TEST(Faults, MismatchedCountsAreReportedNotHung) {
  for (const std::string& transport : testedTransports()) {
    SCOPED_TRACE(transport);
    runRanksRaw({2, Launch::Threads, transport}, [&](const coilUniqueId& id, int rank) {
      coilComm_t comm = initWithTimeout(id, 2, rank, 20000);
      ASSERT_NE(comm, nullptr);
      std::vector<float> x(1000, 1.0f);
      auto t0 = Clock::now();
      coilResult_t rc = coilAllReduce(x.data(), x.data(), rank == 0 ? 100 : 200, coilFloat,
                                      coilSum, comm, nullptr);
      EXPECT_NE(rc, coilSuccess);
      EXPECT_NE(rc, coilTimeout) << "should be detected, not timed out";
      EXPECT_LT(secondsSince(t0), 10.0);
      std::string msg = coilGetLastError(comm);
      EXPECT_TRUE(msg.find("count") != std::string::npos ||
                  msg.find("closed its connection") != std::string::npos)
          << msg;
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    });
  }
}

TEST(Faults, MismatchedDatatypeIsNamed) {
  runRanksRaw({2, Launch::Threads, "shm"}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, 2, rank, 20000);
    ASSERT_NE(comm, nullptr);
    std::vector<double> x(64, 1.0);
    coilResult_t rc = coilAllReduce(x.data(), x.data(), 64, rank == 0 ? coilFloat64 : coilInt64,
                                    coilSum, comm, nullptr);
    EXPECT_NE(rc, coilSuccess);
    std::string msg = coilGetLastError(comm);
    EXPECT_TRUE(msg.find("datatype") != std::string::npos ||
                msg.find("closed its connection") != std::string::npos)
        << msg;
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

TEST(Faults, CollectivesInADifferentOrderAreNamed) {
  for (const std::string& transport : testedTransports()) {
    SCOPED_TRACE(transport);
    runRanksRaw({2, Launch::Threads, transport}, [&](const coilUniqueId& id, int rank) {
      coilComm_t comm = initWithTimeout(id, 2, rank, 20000);
      ASSERT_NE(comm, nullptr);
      std::vector<float> x(256, 1.0f);
      auto t0 = Clock::now();
      // Rank 0 broadcasts first, rank 1 all-reduces first. The broadcast root
      // only sends, so it may finish; its next call must then fail, not hang.
      coilResult_t rc = rank == 0
          ? coilBroadcast(x.data(), x.data(), x.size(), coilFloat, 0, comm, nullptr)
          : coilAllReduce(x.data(), x.data(), x.size(), coilFloat, coilSum, comm, nullptr);
      if (rank == 0 && rc == coilSuccess) rc = coilBarrier(comm, nullptr);
      EXPECT_NE(rc, coilSuccess);
      EXPECT_NE(rc, coilTimeout);
      EXPECT_LT(secondsSince(t0), 10.0);
      std::string msg = coilGetLastError(comm);
      // Which call the mismatch is caught in depends on the algorithms'
      // data paths; either way it names both calls.
      if (rank == 1) {
        EXPECT_NE(msg.find("mismatched collective with rank 0"), std::string::npos) << msg;
        EXPECT_TRUE(msg.find("called broadcast") != std::string::npos ||
                    msg.find("in a different order") != std::string::npos)
            << msg;
      }
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    });
  }
}

TEST(Lifecycle, NonBlockingInit) {
  runRanksRaw({3, Launch::Threads, "shm"}, [&](const coilUniqueId& id, int rank) {
    coilConfig_t config = COIL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.commName = "nonblocking";
    coilComm_t comm = nullptr;
    ASSERT_EQ(coilCommInitRankConfig(&comm, 3, id, rank, &config), coilInProgress);
    ASSERT_EQ(waitReady(comm, 30), coilSuccess) << coilGetLastError(comm);
    int v = rank + 1;
    int sum = 0;
    ASSERT_EQ(coilAllReduce(&v, &sum, 1, coilInt32, coilSum, comm, nullptr), coilSuccess);
    EXPECT_EQ(sum, 6);
    EXPECT_EQ(coilCommFinalize(comm), coilSuccess);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

TEST(Lifecycle, InitAllGivesConnectedRanksInOneProcess) {
  const int n = 4;
  std::vector<coilComm_t> comms(n);
  ASSERT_EQ(coilCommInitAll(comms.data(), n, nullptr), coilSuccess) << coilGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      int rank = -1;
      EXPECT_EQ(coilCommUserRank(comms[r], &rank), coilSuccess);
      EXPECT_EQ(rank, r);
      int64_t v = int64_t{1} << (8 * r), out = 0;
      EXPECT_EQ(coilAllReduce(&v, &out, 1, coilInt64, coilSum, comms[r], nullptr), coilSuccess);
      EXPECT_EQ(out, 0x01010101);
    });
  for (auto& t : threads) t.join();
  for (auto c : comms) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
  // Several ranks may share a device (api_misuse's DeviceArguments); a
  // negative device is refused.
  int bad[2] = {0, -3};
  EXPECT_EQ(coilCommInitAll(comms.data(), 2, bad), coilInvalidArgument);
}

// After every test of this binary — including the aborted, timed-out and
// crashed communicators — nothing coil created may remain in /dev/shm.
[[maybe_unused]] auto* const kNoShmLeftBehind =
    ::testing::AddGlobalTestEnvironment(newShmLeakCheck());

}  // namespace
}  // namespace coil::test
