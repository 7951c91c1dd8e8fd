// coilCommSplit with splitShare=1: children that send over their parent's
// connections. Checked against the reference, over shm and tcp, with ranks
// as threads and as processes:
//  - children over disjoint peers (odd/even) run at the same time;
//  - a child outlives its destroyed parent, a parent outlives its child;
//  - a parent and a child used at once on one rank: the second gets
//    coilInvalidUsage with a message, and nothing waits for its timeout;
//  - the sharing is real: a shared split adds no shm FIFO segments and no
//    data sockets, where a plain split does.
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness/reference.h"
#include "harness/run_ranks.h"

namespace coil::test {
namespace {

constexpr int64_t kTimeoutMs = 20000;

int32_t tagValue(int rank, size_t i) { return static_cast<int32_t>(rank * 100003 + i % 99991); }

coilComm_t splitWith(coilComm_t parent, int color, int key, int share) {
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.timeoutMs = kTimeoutMs;
  config.splitShare = share;
  coilComm_t child = nullptr;
  EXPECT_EQ(coilCommSplit(parent, color, key, &child, &config), coilSuccess)
      << coilGetLastError(parent);
  return child;
}

// All-reduce (sizes that take the one-shot, slice, ring and tree paths),
// broadcast, all-gather and a send/recv ring, each against the reference.
void checkCollectives(coilComm_t comm) {
  int rank = -1, n = 0;
  ASSERT_EQ(coilCommUserRank(comm, &rank), coilSuccess);
  ASSERT_EQ(coilCommCount(comm, &n), coilSuccess);
  for (size_t count : {size_t{1}, size_t{1009}, size_t{70001}, size_t{300001}}) {
    SCOPED_TRACE(::testing::Message() << "allreduce of " << count << " on rank " << rank << "/"
                                      << n);
    auto in = makeInput(coilFloat32, coilSum, rank, n, count);
    auto want = makeExpected(coilFloat32, coilSum, n, count);
    std::vector<uint8_t> out(in.size());
    ASSERT_EQ(coilAllReduce(in.data(), out.data(), count, coilFloat32, coilSum, comm, nullptr),
              coilSuccess)
        << coilGetLastError(comm);
    ASSERT_EQ(firstMismatch(coilFloat32, out.data(), want.data(), count), SIZE_MAX);
  }
  const size_t count = 20011;
  std::vector<int32_t> data(count), all(count * n, -1);
  for (size_t i = 0; i < count; ++i) data[i] = tagValue(rank, i);
  ASSERT_EQ(coilBroadcast(data.data(), data.data(), count, coilInt32, n - 1, comm, nullptr),
            coilSuccess)
      << coilGetLastError(comm);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], tagValue(n - 1, i)) << i;
  for (size_t i = 0; i < count; ++i) data[i] = tagValue(rank, i);
  ASSERT_EQ(coilAllGather(data.data(), all.data(), count, coilInt32, comm, nullptr), coilSuccess)
      << coilGetLastError(comm);
  for (int b = 0; b < n; ++b)
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(all[b * count + i], tagValue(b, i));
  std::vector<int32_t> in(count, -1);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  coilRecv(in.data(), count, coilInt32, prev, comm, nullptr);
  coilSend(data.data(), count, coilInt32, next, comm, nullptr);
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(comm);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], tagValue(prev, i)) << i;
}

class SplitShare : public ::testing::TestWithParam<RankSetup> {
 protected:
  void run(const std::function<void(coilComm_t parent, int rank, int n)>& body) {
    RankSetup setup = GetParam();
    setup.timeoutSeconds = 60;
    runRanksRaw(setup, [&](const coilUniqueId& id, int rank) {
      coilComm_t parent = initWithTimeout(id, setup.nranks, rank, kTimeoutMs);
      ASSERT_NE(parent, nullptr);
      body(parent, rank, setup.nranks);
    });
  }
};

TEST_P(SplitShare, OddAndEvenChildrenRunAtOnceAndTheParentAfterThem) {
  run([](coilComm_t parent, int rank, int n) {
    coilComm_t child = splitWith(parent, rank % 2, -rank, 1);
    ASSERT_NE(child, nullptr);
    int childRank = -1, childSize = 0;
    coilCommUserRank(child, &childRank);
    coilCommCount(child, &childSize);
    EXPECT_EQ(childSize, (n + 1 - rank % 2) / 2);
    EXPECT_EQ(childRank, childSize - 1 - rank / 2);  // key = -rank
    checkCollectives(child);
    // Sequential use from other threads, alternating between the two.
    std::thread([&] { checkCollectives(parent); }).join();
    std::thread([&] { checkCollectives(child); }).join();
    checkCollectives(parent);
    EXPECT_EQ(coilCommDestroy(child), coilSuccess);
    EXPECT_EQ(coilCommDestroy(parent), coilSuccess);
  });
}

TEST_P(SplitShare, ChildOutlivesItsParentAndSharesOnward) {
  run([](coilComm_t parent, int rank, int n) {
    coilComm_t child = splitWith(parent, 0, n - rank, 1);  // reversed order
    ASSERT_NE(child, nullptr);
    EXPECT_EQ(coilCommDestroy(parent), coilSuccess);
    checkCollectives(child);
    // A grandchild borrows the same links, after their first owner is gone.
    int childRank = -1;
    coilCommUserRank(child, &childRank);
    coilComm_t grandchild = splitWith(child, childRank % 2, childRank, 1);
    ASSERT_NE(grandchild, nullptr);
    checkCollectives(grandchild);
    EXPECT_EQ(coilCommDestroy(child), coilSuccess);
    checkCollectives(grandchild);
    EXPECT_EQ(coilCommDestroy(grandchild), coilSuccess);
  });
}

TEST_P(SplitShare, ParentOutlivesItsChildAndNonBlockingSplitShares) {
  run([](coilComm_t parent, int rank, int) {
    coilComm_t child = splitWith(parent, rank % 2, rank, 1);
    ASSERT_NE(child, nullptr);
    checkCollectives(child);
    EXPECT_EQ(coilCommDestroy(child), coilSuccess);
    checkCollectives(parent);

    coilConfig_t config = COIL_CONFIG_INITIALIZER;
    config.timeoutMs = kTimeoutMs;
    config.splitShare = 1;
    config.blocking = 0;
    coilComm_t pending = nullptr;
    ASSERT_EQ(coilCommSplit(parent, 0, rank, &pending, &config), coilInProgress)
        << coilGetLastError(parent);
    ASSERT_EQ(waitReady(pending, 10), coilSuccess) << coilGetLastError(pending);
    checkCollectives(pending);
    checkCollectives(parent);
    EXPECT_EQ(coilCommDestroy(pending), coilSuccess);
    EXPECT_EQ(coilCommDestroy(parent), coilSuccess);
  });
}

// Rank 0 starts an all-reduce on `holder` that cannot finish before the
// other ranks join it, 2.5 s later; meanwhile, 0.5 s after starting it, it
// calls one on `intruder`, which shares its links. The intruder must be
// refused at once, and every call on every rank must end well before the
// 20 s timeout. (The holder claims its links as its call starts; with 150
// ms and 600 ms, a loaded CI machine once ran the intruder first.)
void concurrentUse(coilComm_t parent, int rank, bool parentHolds) {
  coilComm_t child = splitWith(parent, 0, rank, 1);
  ASSERT_NE(child, nullptr);
  coilComm_t holder = parentHolds ? parent : child;
  coilComm_t intruder = parentHolds ? child : parent;
  std::vector<float> a(4096, 1.0f), b(4096, 1.0f);
  // Used one after the other, both work.
  ASSERT_EQ(coilAllReduce(a.data(), a.data(), a.size(), coilFloat, coilSum, intruder, nullptr),
            coilSuccess)
      << coilGetLastError(intruder);
  ASSERT_EQ(coilAllReduce(b.data(), b.data(), b.size(), coilFloat, coilSum, holder, nullptr),
            coilSuccess)
      << coilGetLastError(holder);
  const auto t0 = Clock::now();
  if (rank == 0) {
    std::thread busy(
        [&] { coilAllReduce(a.data(), a.data(), a.size(), coilFloat, coilSum, holder, nullptr); });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const auto t1 = Clock::now();
    EXPECT_EQ(coilAllReduce(b.data(), b.data(), b.size(), coilFloat, coilSum, intruder, nullptr),
              coilInvalidUsage);
    EXPECT_LT(secondsSince(t1), 1.0);
    const std::string msg = coilGetLastError(intruder);
    EXPECT_NE(msg.find("in use by another communicator that shares it"), std::string::npos) << msg;
    EXPECT_NE(msg.find("splitShare"), std::string::npos) << msg;
    busy.join();
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    coilAllReduce(a.data(), a.data(), a.size(), coilFloat, coilSum, holder, nullptr);
    // Rank 0's intruder broke: this rank's intruder cannot complete either.
    EXPECT_NE(coilAllReduce(b.data(), b.data(), b.size(), coilFloat, coilSum, intruder, nullptr),
              coilSuccess);
  }
  EXPECT_LT(secondsSince(t0), 8.0) << "a failure must not wait for the timeout";
  EXPECT_EQ(coilCommDestroy(child), coilSuccess);
  EXPECT_EQ(coilCommDestroy(parent), coilSuccess);
}

TEST_P(SplitShare, ARankThatMovesOnToTheChildDoesNotLookLikeAMismatch) {
  // Sequential use is allowed: a rank done with the parent's call may start
  // the child's while a peer still waits in the parent's. That peer's
  // stalled wait then finds the child's slot at the head of a link it does
  // not read in this call; it must not call it a mismatch (it did, for the
  // half of the children whose call numbers start below the parent's, as
  // random_program_test found). A gather: the non-roots are done once their
  // block is sent, while the root still takes the large blocks in; then an
  // all-gather of the child, whose ring goes through the FIFOs.
  run([](coilComm_t parent, int rank, int n) {
    const size_t block = 1 << 18;
    std::vector<int32_t> mine(block), all(block * n);
    for (size_t i = 0; i < block; ++i) mine[i] = tagValue(rank, i);
    for (int split = 0; split < 8; ++split) {
      coilComm_t child = splitWith(parent, 0, rank, 1);
      ASSERT_NE(child, nullptr);
      for (int round = 0; round < 3; ++round) {
        const int root = (split + round) % n;
        ASSERT_EQ(coilGather(mine.data(), all.data(), block, coilInt32, root, parent, nullptr),
                  coilSuccess)
            << "split " << split << " round " << round << ": " << coilGetLastError(parent);
        if (rank == root) {
          for (int b = 0; b < n; ++b)
            for (size_t i = 0; i < block; i += 4099) ASSERT_EQ(all[b * block + i], tagValue(b, i));
        }
        // An all-gather through the FIFOs (the ring), not the window.
        const size_t each = 4093;
        std::vector<int32_t> piece(mine.begin(), mine.begin() + each), pieces(each * n);
        ASSERT_EQ(coilAllGather(piece.data(), pieces.data(), each, coilInt32, child, nullptr),
                  coilSuccess)
            << "split " << split << " round " << round << ": " << coilGetLastError(child);
        for (int b = 0; b < n; ++b) ASSERT_EQ(pieces[b * each + each - 1], tagValue(b, each - 1));
      }
      ASSERT_EQ(coilCommDestroy(child), coilSuccess);
    }
    ASSERT_EQ(coilCommDestroy(parent), coilSuccess);
  });
}

TEST_P(SplitShare, ChildCalledWhileParentBusyIsRefused) {
  run([](coilComm_t parent, int rank, int) { concurrentUse(parent, rank, true); });
}

TEST_P(SplitShare, ParentCalledWhileChildBusyIsRefused) {
  run([](coilComm_t parent, int rank, int) { concurrentUse(parent, rank, false); });
}

// Shared links share fate: rank 0 aborts its child while an all-reduce on it
// waits for ranks that never join; the call ends at once, and the parent,
// whose links the abort closed, fails on every rank instead of waiting.
TEST_P(SplitShare, AbortedChildEndsAtOnceAndTakesTheParentAlong) {
  run([](coilComm_t parent, int rank, int) {
    coilComm_t child = splitWith(parent, 0, rank, 1);
    ASSERT_NE(child, nullptr);
    std::vector<float> a(4096, 1.0f);
    if (rank == 0) {
      std::thread blocked([&] {
        EXPECT_NE(coilAllReduce(a.data(), a.data(), a.size(), coilFloat, coilSum, child, nullptr),
                  coilSuccess);
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      const auto t0 = Clock::now();
      EXPECT_EQ(coilCommAbort(child), coilSuccess);
      blocked.join();
      EXPECT_LT(secondsSince(t0), 1.0);
      EXPECT_EQ(coilAllReduce(a.data(), a.data(), a.size(), coilFloat, coilSum, parent, nullptr),
                coilRemoteError);
      const std::string msg = coilGetLastError(parent);
      EXPECT_NE(msg.find("shared links share fate"), std::string::npos) << msg;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      const auto t0 = Clock::now();
      EXPECT_NE(coilAllReduce(a.data(), a.data(), a.size(), coilFloat, coilSum, parent, nullptr),
                coilSuccess);
      EXPECT_LT(secondsSince(t0), 5.0) << "a failure must not wait for the timeout";
      EXPECT_EQ(coilCommDestroy(child), coilSuccess);
    }
    EXPECT_EQ(coilCommDestroy(parent), coilSuccess);
  });
}

// What a process holds: mappings of shm FIFO segments (/dev/shm/coil-*-rN,
// unlinked but mapped) and open sockets.
struct Holdings {
  int fifoMappings = 0;
  int sockets = 0;
};

Holdings holdings() {
  Holdings h;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find("/dev/shm/coil-");
    if (at != std::string::npos && line.find("-r", at) != std::string::npos) ++h.fifoMappings;
  }
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char target[128] = {};
      const std::string path = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(path.c_str(), target, sizeof target - 1) > 0 &&
          std::string(target).rfind("socket:", 0) == 0)
        ++h.sockets;
    }
    closedir(d);
  }
  return h;
}

TEST_P(SplitShare, SharedSplitOpensNoConnectionsPlainSplitDoes) {
  // COIL_SPLIT_SHARE=1 is the default of a split whose config leaves it unset.
  ScopedEnv env("COIL_SPLIT_SHARE", "1");
  run([](coilComm_t parent, int rank, int n) {
    // Every rank quiet (threads: the counts are the whole process's), and
    // the rendezvous roots of the last split gone.
    auto snapshot = [&] {
      EXPECT_EQ(coilBarrier(parent, nullptr), coilSuccess) << coilGetLastError(parent);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      Holdings h = holdings();
      EXPECT_EQ(coilBarrier(parent, nullptr), coilSuccess) << coilGetLastError(parent);
      return h;
    };
    const Holdings before = snapshot();
    coilComm_t shared = splitWith(parent, 0, rank, 1);
    const Holdings afterShared = snapshot();
    coilComm_t plain = splitWith(parent, 0, rank, 0);
    const Holdings afterPlain = snapshot();
    coilComm_t byEnv = splitWith(parent, 0, rank, COIL_CONFIG_UNDEF_INT);
    const Holdings afterEnv = snapshot();
    ASSERT_TRUE(shared && plain && byEnv);
    const int sharedSockets = afterShared.sockets - before.sockets;
    const int plainSockets = afterPlain.sockets - afterShared.sockets;
    const int envSockets = afterEnv.sockets - afterPlain.sockets;
    if (GetParam().transport == "shm") {
      EXPECT_EQ(afterShared.fifoMappings, before.fifoMappings);
      EXPECT_GT(afterPlain.fifoMappings, afterShared.fifoMappings);
      EXPECT_EQ(afterEnv.fifoMappings, afterPlain.fifoMappings);
    } else {
      // Each split has the same bootstrap sockets; a plain one adds at least
      // a FIFO socket and an express socket per peer (both ends in threads).
      EXPECT_GE(plainSockets - sharedSockets, 2 * (n - 1))
          << sharedSockets << " vs " << plainSockets;
      EXPECT_GE(plainSockets - envSockets, 2 * (n - 1)) << envSockets << " vs " << plainSockets;
    }
    for (coilComm_t c : {shared, plain, byEnv}) checkCollectives(c);
    for (coilComm_t c : {shared, plain, byEnv}) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
    EXPECT_EQ(coilCommDestroy(parent), coilSuccess);
  });
}

TEST_P(SplitShare, RanksThatDisagreeOnSharingGetNoChild) {
  run([](coilComm_t parent, int rank, int) {
    coilConfig_t config = COIL_CONFIG_INITIALIZER;
    config.timeoutMs = kTimeoutMs;
    config.splitShare = rank == 1 ? 0 : 1;
    coilComm_t child = reinterpret_cast<coilComm_t>(1);
    EXPECT_EQ(coilCommSplit(parent, 0, rank, &child, &config), coilInvalidUsage);
    EXPECT_EQ(child, nullptr);
    const std::string msg = coilGetLastError(parent);
    EXPECT_NE(msg.find("splitShare differs between the ranks"), std::string::npos) << msg;
    // The parent is intact.
    checkCollectives(parent);
    EXPECT_EQ(coilCommDestroy(parent), coilSuccess);
  });
}

std::vector<RankSetup> setups() {
  std::vector<RankSetup> out;
  for (Launch launch : {Launch::Threads, Launch::Processes})
    for (const std::string& transport : testedTransports())
      for (int n : {4, 5}) out.push_back({n, launch, transport});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, SplitShare, ::testing::ValuesIn(setups()),
                         [](const ::testing::TestParamInfo<RankSetup>& info) {
                           return paramName(info.param);
                         });

TEST(SplitShareConfig, ValueIsCheckedAndOlderConfigsStillWork) {
  runRanksRaw({2, Launch::Threads, "shm"}, [](const coilUniqueId& id, int rank) {
    coilComm_t parent = initWithTimeout(id, 2, rank, kTimeoutMs);
    ASSERT_NE(parent, nullptr);
    coilConfig_t bad = COIL_CONFIG_INITIALIZER;
    bad.splitShare = 2;
    coilComm_t child = nullptr;
    EXPECT_EQ(coilCommSplit(parent, 0, rank, &child, &bad), coilInvalidArgument);
    EXPECT_NE(std::string(coilGetLastError(parent)).find("splitShare must be 0 or 1"),
              std::string::npos)
        << coilGetLastError(parent);
    // A caller built against version 1 has no splitShare field: whatever
    // lies past its struct is not read.
    coilConfig_t old = COIL_CONFIG_INITIALIZER;
    old.version = 1;
    old.size = offsetof(coilConfig_t, splitShare);
    old.splitShare = 12345;
    ASSERT_EQ(coilCommSplit(parent, 0, rank, &child, &old), coilSuccess)
        << coilGetLastError(parent);
    ASSERT_NE(child, nullptr);
    checkCollectives(child);
    EXPECT_EQ(coilCommDestroy(child), coilSuccess);
    EXPECT_EQ(coilCommDestroy(parent), coilSuccess);
  });
}

[[maybe_unused]] auto* const kNoShmLeftBehind =
    ::testing::AddGlobalTestEnvironment(newShmLeakCheck());

}  // namespace
}  // namespace coil::test
