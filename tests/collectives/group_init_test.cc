// Inits inside coilGroupStart/End, and non-blocking init: NCCL's semantics.
//
//  - One thread creates every rank's communicator between GroupStart and
//    GroupEnd (NCCL's single-process, many-devices pattern). Each init is
//    deferred to the outermost GroupEnd, where they all run together; before
//    that fix each init waited for the others and the thread hung.
//  - config.blocking = 0 makes init return coilInProgress, and
//    coilCommGetAsyncError says coilInProgress until the communicator is
//    ready. Inside a group, GroupEnd returns coilInProgress instead.
// Results are checked against sums computed here; rank counts 3 and 5.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "harness/asan_allocator.h"
#include "harness/run_ranks.h"
#include "harness/wait_or_kill.h"

namespace coil::test {
namespace {

constexpr int64_t kTimeoutMs = 20000;

coilConfig_t configWith(int blocking, int64_t timeoutMs = kTimeoutMs) {
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.blocking = blocking;
  config.timeoutMs = timeoutMs;
  return config;
}

// One all-reduce per communicator, all issued from this thread in a group
// (the way NCCL drives several devices from one thread), checked against
// the sum 1 + 2 + ... + n.
void checkAllReduceInGroup(const std::vector<coilComm_t>& comms, int firstRank, int n) {
  std::vector<int64_t> in(comms.size()), out(comms.size(), -1);
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  for (size_t i = 0; i < comms.size(); ++i) {
    in[i] = firstRank + static_cast<int64_t>(i) + 1;
    ASSERT_EQ(coilAllReduce(&in[i], &out[i], 1, coilInt64, coilSum, comms[i], nullptr),
              coilSuccess);
  }
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(nullptr);
  for (int64_t v : out) EXPECT_EQ(v, int64_t{n} * (n + 1) / 2);
}

class GroupInit : public ::testing::TestWithParam<int> {};

TEST_P(GroupInit, OneThreadInitsEveryRankWithCommInitRank) {
  const int n = GetParam();
  ScopedEnv timeout("COIL_TIMEOUT_MS", std::to_string(kTimeoutMs));
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  std::vector<coilComm_t> comms(n, nullptr);
  const auto t0 = Clock::now();
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  for (int r = 0; r < n; ++r) ASSERT_EQ(coilCommInitRank(&comms[r], n, id, r), coilSuccess);
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(nullptr);
  EXPECT_LT(secondsSince(t0), 15.0);
  for (int r = 0; r < n; ++r) {
    coilResult_t state = coilInternalError;
    EXPECT_EQ(coilCommGetAsyncError(comms[r], &state), coilSuccess);
    EXPECT_EQ(state, coilSuccess);
    int rank = -1;
    EXPECT_EQ(coilCommUserRank(comms[r], &rank), coilSuccess);
    EXPECT_EQ(rank, r);
  }
  checkAllReduceInGroup(comms, 0, n);
  for (coilComm_t c : comms) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
}

TEST_P(GroupInit, OneThreadInitsEveryRankWithConfig) {
  const int n = GetParam();
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  std::vector<coilComm_t> comms(n, nullptr);
  coilConfig_t config = configWith(1);
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  ASSERT_EQ(coilGroupStart(), coilSuccess);  // nested: only the outer end runs the inits
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(coilCommInitRankConfig(&comms[r], n, id, r, &config), coilSuccess);
  ASSERT_EQ(coilGroupEnd(), coilSuccess);
  coilResult_t state = coilSuccess;
  ASSERT_EQ(coilCommGetAsyncError(comms[0], &state), coilSuccess);
  EXPECT_EQ(state, coilInProgress);  // not before the outermost end
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(nullptr);
  checkAllReduceInGroup(comms, 0, n);
  for (coilComm_t c : comms) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
}

TEST_P(GroupInit, NonBlockingConfigsInAGroupEndInProgress) {
  const int n = GetParam();
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  std::vector<coilComm_t> comms(n, nullptr);
  coilConfig_t config = configWith(0);
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(coilCommInitRankConfig(&comms[r], n, id, r, &config), coilSuccess);
  ASSERT_EQ(coilGroupEnd(), coilInProgress) << coilGetLastError(nullptr);
  for (coilComm_t c : comms) ASSERT_EQ(waitReady(c), coilSuccess) << coilGetLastError(c);
  checkAllReduceInGroup(comms, 0, n);
  for (coilComm_t c : comms) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
}

// Ranks as processes: each process holds some of the ranks and inits them
// from one thread in a group (ranks 0-1 in one process, the rest in another:
// for n = 3 that is a group of one).
TEST_P(GroupInit, ProcessesEachInitSeveralRanksInAGroup) {
  const int n = GetParam();
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  // Process p holds ranks [first[p], first[p+1]).
  const std::vector<int> first = {0, 2, n};
  std::vector<pid_t> children;
  for (size_t p = 0; p + 1 < first.size(); ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid != 0) {
      noteForkedRank(pid);  // its segments count in this binary's leak check
      children.push_back(pid);
      continue;
    }
    alarm(60);  // a hang ends the child, and the parent reports it
    const int lo = first[p], hi = first[p + 1];
    std::vector<coilComm_t> comms(static_cast<size_t>(hi - lo), nullptr);
    coilConfig_t config = configWith(1);
    bool ok = coilGroupStart() == coilSuccess;
    for (int r = lo; r < hi; ++r)
      ok = ok && coilCommInitRankConfig(&comms[r - lo], n, id, r, &config) == coilSuccess;
    ok = ok && coilGroupEnd() == coilSuccess;
    std::vector<int64_t> in(comms.size()), out(comms.size(), -1);
    ok = ok && coilGroupStart() == coilSuccess;
    for (size_t i = 0; ok && i < comms.size(); ++i) {
      in[i] = lo + static_cast<int64_t>(i) + 1;
      ok = coilAllReduce(&in[i], &out[i], 1, coilInt64, coilSum, comms[i], nullptr) == coilSuccess;
    }
    ok = ok && coilGroupEnd() == coilSuccess;
    for (int64_t v : out) ok = ok && v == int64_t{n} * (n + 1) / 2;
    if (!ok) fprintf(stderr, "ranks [%d, %d): %s\n", lo, hi, coilGetLastError(nullptr));
    for (coilComm_t c : comms) coilCommDestroy(c);
    _exit(ok ? 0 : 1);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
}

// NCCL's multi-device split: one thread splits every rank's communicator
// inside a group (each split is collective over the parent, so the splits
// can only complete together at coilGroupEnd). Keys reverse the order.
TEST_P(GroupInit, OneThreadSplitsEveryRank) {
  const int n = GetParam();
  ScopedEnv timeout("COIL_TIMEOUT_MS", std::to_string(kTimeoutMs));
  std::vector<coilComm_t> comms(n, nullptr), kids(n, nullptr), pending(n, nullptr);
  ASSERT_EQ(coilCommInitAll(comms.data(), n, nullptr), coilSuccess) << coilGetLastError(nullptr);
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(coilCommSplit(comms[r], r % 2, n - r, &kids[r], nullptr), coilSuccess)
        << coilGetLastError(comms[r]);
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    ASSERT_NE(kids[r], nullptr);
    int size = 0, rank = -1;
    EXPECT_EQ(coilCommCount(kids[r], &size), coilSuccess);
    EXPECT_EQ(coilCommUserRank(kids[r], &rank), coilSuccess);
    const int members = r % 2 == 0 ? (n + 1) / 2 : n / 2;
    EXPECT_EQ(size, members);
    EXPECT_EQ(rank, members - 1 - r / 2) << "parent rank " << r;
  }
  std::vector<int64_t> in(n), out(n, -1);
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  for (int r = 0; r < n; ++r) {
    in[r] = r;
    ASSERT_EQ(coilAllReduce(&in[r], &out[r], 1, coilInt64, coilSum, kids[r], nullptr),
              coilSuccess);
  }
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    int64_t want = 0;
    for (int q = r % 2; q < n; q += 2) want += q;
    EXPECT_EQ(out[r], want) << "parent rank " << r;
  }
  // Non-blocking, with one rank left out (COIL_SPLIT_NOCOLOR: no child).
  coilConfig_t config = configWith(0);
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(coilCommSplit(comms[r], r == 0 ? COIL_SPLIT_NOCOLOR : 0, r, &pending[r], &config),
              coilSuccess);
  ASSERT_EQ(coilGroupEnd(), coilInProgress) << coilGetLastError(nullptr);
  EXPECT_EQ(pending[0], nullptr);
  for (int r = 1; r < n; ++r) ASSERT_EQ(waitReady(pending[r]), coilSuccess);
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  for (int r = 1; r < n; ++r)
    ASSERT_EQ(coilAllReduce(&in[r], &out[r], 1, coilInt64, coilSum, pending[r], nullptr),
              coilSuccess);
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(nullptr);
  for (int r = 1; r < n; ++r) EXPECT_EQ(out[r], int64_t{n} * (n - 1) / 2);
  for (auto* group : {&pending, &kids, &comms})
    for (coilComm_t c : *group) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
}

INSTANTIATE_TEST_SUITE_P(Ranks, GroupInit, ::testing::Values(3, 5),
                         [](const auto& info) { return std::string("n").append(std::to_string(info.param)); });

// A rank that never comes: the group's inits fail at their deadline, every
// handle reports the error, and each can be destroyed.
TEST(GroupInitFailure, MissingRankTimesOutAtGroupEnd) {
  coilUniqueId id;
  {
    ScopedEnv shortRoot("COIL_TIMEOUT_MS", "1500");  // the root gives up too
    ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  }
  std::vector<coilComm_t> comms(2, nullptr);
  coilConfig_t config = configWith(1, 1500);
  const auto t0 = Clock::now();
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(coilCommInitRankConfig(&comms[r], 3, id, r, &config), coilSuccess);
  const coilResult_t rc = coilGroupEnd();
  EXPECT_NE(rc, coilSuccess);
  EXPECT_NE(rc, coilInProgress);
  EXPECT_LT(secondsSince(t0), 10.0);
  EXPECT_NE(std::string(coilGetLastError(nullptr)).find("coilGroupEnd"), std::string::npos)
      << coilGetLastError(nullptr);
  for (coilComm_t c : comms) {
    ASSERT_NE(c, nullptr);
    coilResult_t state = coilSuccess;
    EXPECT_EQ(coilCommGetAsyncError(c, &state), coilSuccess);
    EXPECT_NE(state, coilSuccess);
    EXPECT_NE(state, coilInProgress);
    int one = 1, sum = 0;
    EXPECT_EQ(coilAllReduce(&one, &sum, 1, coilInt32, coilSum, c, nullptr), coilInvalidUsage);
    EXPECT_EQ(coilCommDestroy(c), coilSuccess);
  }
}

// Bad arguments are still refused at the call, not deferred to GroupEnd.
TEST(GroupInitFailure, BadArgumentsFailAtTheCall) {
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  coilComm_t comm = nullptr;
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  EXPECT_EQ(coilCommInitRank(&comm, 2, id, 5), coilInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(coilGetLastError(nullptr)).find("rank 5 is out of range"),
            std::string::npos);
  EXPECT_EQ(coilGroupEnd(), coilSuccess);
}

// A handle destroyed before its group ends is simply not initialised.
TEST(GroupInitFailure, DestroyBeforeGroupEnd) {
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  coilComm_t comm = nullptr;
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  ASSERT_EQ(coilCommInitRank(&comm, 1, id, 0), coilSuccess);
  EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  EXPECT_EQ(coilGroupEnd(), coilSuccess);
}

// coilCommInitAll hosts several ranks in one process, which share the
// GPU's hardware queues: it asks CUDA for all 32 (staged_stream.h), unless
// the application set CUDA_DEVICE_MAX_CONNECTIONS itself. Each case runs in
// a child, whose environment it may change.
TEST(InitAll, AsksForEveryHardwareQueueUnlessTheApplicationChose) {
  // The tests before this one may leave a thread of theirs running (a
  // failed init's), and a child forked while it allocates can hang in the
  // sanitizer's malloc: it did once in CI's sanitizer leg, for 300 s.
  if (kAsanAllocator)
    GTEST_SKIP() << "this build's AddressSanitizer allocator is not fork-safe with a thread "
                    "allocating (harness/asan_allocator.h); the release build runs this test";
  for (const char* preset : {static_cast<const char*>(nullptr), "4"}) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (preset) setenv("CUDA_DEVICE_MAX_CONNECTIONS", preset, 1);
      else unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
      coilComm_t comms[3] = {};
      if (coilCommInitAll(comms, 3, nullptr) != coilSuccess) _exit(2);
      const char* now = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
      const std::string want = preset ? preset : "32";
      for (coilComm_t c : comms) coilCommDestroy(c);
      _exit(now != nullptr && want == now ? 0 : 1);
    }
    const int status = waitOrKill(pid, std::chrono::steady_clock::now() + std::chrono::seconds(60));
    EXPECT_EQ(status, 0) << (preset ? "preset 4 was overwritten" : "32 was not asked for")
                         << " (2: the init failed; -1: the child hung and was killed)";
  }
}

// A group belongs to the thread that opened it (as in NCCL): while one
// thread's group is open, nested, or ended by coilGroupSimulateEnd, another
// thread's calls still run at once, and the first thread's wait for its
// coilGroupEnd. (inGroup() answers from a process-wide count of open groups
// before it asks the thread's own.)
TEST(GroupsPerThread, AnotherThreadsOpenGroupLeavesThisThreadsCallsImmediate) {
  coilComm_t comms[2] = {};
  ASSERT_EQ(coilCommInitAll(comms, 1, nullptr), coilSuccess) << coilGetLastError(nullptr);
  ASSERT_EQ(coilCommInitAll(comms + 1, 1, nullptr), coilSuccess) << coilGetLastError(nullptr);
  auto immediate = [&](coilComm_t comm, int64_t value) {
    int64_t out = -1;
    EXPECT_EQ(coilAllReduce(&value, &out, 1, coilInt64, coilSum, comm, nullptr), coilSuccess);
    EXPECT_EQ(out, value) << "the call did not run before it returned";
  };
  int64_t in = 7, out = -1;
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  ASSERT_EQ(coilGroupStart(), coilSuccess);  // nested
  ASSERT_EQ(coilAllReduce(&in, &out, 1, coilInt64, coilSum, comms[0], nullptr), coilSuccess);
  EXPECT_EQ(out, -1) << "a call inside a group ran before coilGroupEnd";
  std::thread other([&] { immediate(comms[1], 11); });
  other.join();
  ASSERT_EQ(coilGroupEnd(), coilSuccess);  // the inner end: still grouped
  EXPECT_EQ(out, -1);
  std::thread again([&] { immediate(comms[1], 12); });
  again.join();
  ASSERT_EQ(coilGroupEnd(), coilSuccess);
  EXPECT_EQ(out, 7);
  immediate(comms[0], 13);  // this thread's group is closed

  // A group ended by coilGroupSimulateEnd is closed too, on both threads.
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  std::thread during([&] { immediate(comms[1], 14); });
  during.join();
  coilSimInfo_t info = COIL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(coilGroupSimulateEnd(&info), coilSuccess) << coilGetLastError(nullptr);
  immediate(comms[0], 15);
  std::thread after([&] { immediate(comms[1], 16); });
  after.join();
  for (coilComm_t c : comms) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
}

class NonBlockingInit : public ::testing::TestWithParam<int> {};

TEST_P(NonBlockingInit, ReturnsInProgressUntilReady) {
  const int n = GetParam();
  runRanksRaw({n, Launch::Threads, "shm"}, [&](const coilUniqueId& id, int rank) {
    coilConfig_t config = configWith(0);
    coilComm_t comm = nullptr;
    ASSERT_EQ(coilCommInitRankConfig(&comm, n, id, rank, &config), coilInProgress);
    ASSERT_NE(comm, nullptr);
    ASSERT_EQ(waitReady(comm), coilSuccess) << coilGetLastError(comm);
    int64_t v = rank + 1, sum = 0;
    ASSERT_EQ(coilAllReduce(&v, &sum, 1, coilInt64, coilSum, comm, nullptr), coilSuccess);
    EXPECT_EQ(sum, int64_t{n} * (n + 1) / 2);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

TEST_P(NonBlockingInit, SplitReturnsInProgressToo) {
  const int n = GetParam();
  runRanks({n, Launch::Processes, "tcp"}, [&](coilComm_t parent, int rank) {
    coilConfig_t config = configWith(0);
    coilComm_t child = nullptr;
    ASSERT_EQ(coilCommSplit(parent, rank % 2, rank, &child, &config), coilInProgress);
    ASSERT_EQ(waitReady(child), coilSuccess) << coilGetLastError(child);
    int size = 0;
    ASSERT_EQ(coilCommCount(child, &size), coilSuccess);
    EXPECT_EQ(size, rank % 2 == 0 ? (n + 1) / 2 : n / 2);
    int64_t v = rank, sum = -1, want = 0;
    for (int r = rank % 2; r < n; r += 2) want += r;
    ASSERT_EQ(coilAllReduce(&v, &sum, 1, coilInt64, coilSum, child, nullptr), coilSuccess);
    EXPECT_EQ(sum, want);
    EXPECT_EQ(coilCommDestroy(child), coilSuccess);
    // No color: nothing to wait for, so plain success.
    coilComm_t none = nullptr;
    EXPECT_EQ(coilCommSplit(parent, COIL_SPLIT_NOCOLOR, 0, &none, &config), coilSuccess);
    EXPECT_EQ(none, nullptr);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, NonBlockingInit, ::testing::Values(3, 5),
                         [](const auto& info) { return std::string("n").append(std::to_string(info.param)); });

[[maybe_unused]] auto* const kNoShmLeftBehind =
    ::testing::AddGlobalTestEnvironment(newShmLeakCheck());

}  // namespace
}  // namespace coil::test
