// The whole device path of the library on the fake GPU (fake_device.cc):
// communicators made through the C API, calls on "device" buffers and
// streams, the peer windows made at init (cuMem's part played by memfd
// segments, their descriptors passed between ranks as on a GPU host; the
// legacy IPC fallback's handles opened through /proc) and the all-reduce
// over them, beside the staged path. Ranks as threads (host
// order: they share the one fake GPU in one process) and as processes
// (stream order), over shm and tcp, at awkward sizes and rank counts,
// checked bit for bit against the reference. No GPU needed; what this
// cannot show is CUDA itself (the gpu suite's peer runs do).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <new>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/handle.h"
#include "device/device.h"
#include "harness/call_collective.h"
#include "harness/collective_reference.h"
#include "harness/reference.h"
#include "harness/run_ranks.h"
#include "tests/device/fake_device.h"
#include "tests/device/staged_between.h"

namespace coil::test {
namespace {

using FakeDeviceBuffer = device::fake::DeviceBuffer;

struct Case {
  coilDataType_t type;
  coilRedOp_t op;
  size_t count;
  bool inPlace;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {coilInt32, coilSum, 1, false},     {coilInt32, coilSum, 2, false},
      {coilInt32, coilSum, 131, false},   {coilInt32, coilSum, 3001, true},
      {coilFloat32, coilAvg, 1000, false}, {coilBfloat16, coilMax, 2999, false},
      {coilInt64, coilProd, 53, false},   {coilUint8, coilMin, 4099, true},
      {coilFloat64, coilSum, 2049, false}, {coilUint64, coilBxor, 1031, false},
      {coilInt8, coilBand, 977, true},
  };
  return all;
}

// Waits for the stream, then checks that no call on it failed after it
// returned.
void expectStreamRanClean(coilComm_t comm, device::Stream stream) {
  device::syncStream(stream);
  coilResult_t async = coilSuccess;
  ASSERT_EQ(coilCommGetAsyncError(comm, &async), coilSuccess);
  ASSERT_EQ(async, coilSuccess) << coilGetLastError(comm);
}

// Waits for the stream, then checks that a call on it failed after it
// returned with `code`; returns the message.
std::string streamFailedWith(coilComm_t comm, device::Stream stream, coilResult_t code) {
  device::syncStream(stream);
  coilResult_t async = coilSuccess;
  EXPECT_EQ(coilCommGetAsyncError(comm, &async), coilSuccess);
  EXPECT_EQ(async, code);
  return coilGetLastError(comm);
}

// Every case's all-reduce on device buffers and a stream, then an
// all-gather (staged: not an all-reduce) in between, each checked.
void allReduceEveryCase(coilComm_t comm, int rank, int nranks) {
  device::Stream stream = device::createStream();
  for (const Case& c : cases()) {
    SCOPED_TRACE(::testing::Message() << nameOf(c.type) << " " << nameOf(c.op) << " count "
                                      << c.count << (c.inPlace ? " in place" : ""));
    const size_t bytes = c.count * sizeOf(c.type);
    const auto in = makeInput(c.type, c.op, rank, nranks, c.count);
    const auto want = makeExpected(c.type, c.op, nranks, c.count);
    FakeDeviceBuffer send(bytes), recv(bytes);
    std::memcpy(send.get(), in.data(), bytes);
    uint8_t* out = c.inPlace ? send.get() : recv.get();
    ASSERT_EQ(coilAllReduce(send.get(), out, c.count, c.type, c.op, comm, stream), coilSuccess)
        << coilGetLastError(comm);
    ASSERT_NO_FATAL_FAILURE(expectStreamRanClean(comm, stream));
    ASSERT_EQ(firstMismatch(c.type, out, want.data(), c.count), SIZE_MAX);

    expectStagedAllGather(comm, rank, nranks, static_cast<int32_t>(c.count), stream);
  }
  device::destroyStream(stream);
}

// Every other collective on device buffers and a stream, each followed by
// a staged call, checked: on the peer windows where `onWindows` (a counter
// shows each took that path), staged otherwise. Counts: 1, a prime, one
// that spans several pieces of a 4 KiB slot; roots 0 and the last rank.
void everyOtherCollective(coilComm_t comm, int rank, int nranks, bool onWindows) {
  using K = algo::CollKind;
  device::Stream stream = device::createStream();
  std::vector<CollectiveCase> todo;
  for (K k : {K::Broadcast, K::Reduce, K::AllGather, K::ReduceScatter, K::AllToAll, K::Gather,
              K::Scatter})
    for (int root : {0, nranks - 1})
      for (bool inPlace : {false, true}) {
        if (k == K::AllToAll && inPlace) continue;
        todo.push_back({k, coilInt32, coilSum, 1, root, inPlace});
        todo.push_back({k, coilFloat32, coilMax, 1031, root, inPlace});
        todo.push_back({k, coilBfloat16, coilAvg, 2999, root, !inPlace && k != K::AllToAll});
      }
  for (const CollectiveCase& c : todo) {
    SCOPED_TRACE(describe(c));
    const size_t es = sizeOf(c.type);
    FakeDeviceBuffer send(inputElems(c, nranks) * es), recv(outputElems(c, nranks) * es);
    const PlacedCall placed = placeCall(c, rank, nranks, send.get(), recv.get());
    const uint64_t before = comm->peerWindows ? comm->peerWindows->callsRun.load() : 0;
    ASSERT_EQ(callCollective(c, placed, comm, stream), coilSuccess) << coilGetLastError(comm);
    ASSERT_NO_FATAL_FAILURE(expectStreamRanClean(comm, stream));
    const uint64_t after = comm->peerWindows ? comm->peerWindows->callsRun.load() : 0;
    EXPECT_EQ(after - before, onWindows ? 1u : 0u);
    const std::vector<uint8_t> want = collectiveExpected(c, rank, nranks);
    if (!want.empty()) {
      ASSERT_EQ(firstMismatch(c.type, placed.recv, want.data(), outputElems(c, nranks)), SIZE_MAX);
    }
    expectStagedAllGather(comm, rank, nranks, static_cast<int32_t>(c.count), stream);
  }
  device::destroyStream(stream);
}

struct FakeGpuSetup {
  RankSetup ranks;
  bool windows;          // COIL_PEER_WINDOW_BYTES: 4096 (several chunks) or 0 (staged)
  bool legacy = false;   // COIL_PEER_IPC=legacy, else auto (cuMem)
};

std::string kindOfSetup(const FakeGpuSetup& s) {
  return !s.windows ? "staged" : s.legacy ? "legacy_ipc" : "windows";
}

void PrintTo(const FakeGpuSetup& s, std::ostream* os) {
  *os << paramName(s.ranks) << " " << kindOfSetup(s);
}

std::string name(const ::testing::TestParamInfo<FakeGpuSetup>& info) {
  return paramName(info.param.ranks) + "_" + kindOfSetup(info.param);
}

class FakeGpuComm : public ::testing::TestWithParam<FakeGpuSetup> {
 protected:
  // Runs body(comm, rank, windows) on every rank of the setup, with 4 KiB
  // slots (several pieces) for every size, or none; `windows`: whether the
  // calls must take the peer windows.
  void run(const std::function<void(coilComm_t, int, bool)>& body) {
    const FakeGpuSetup s = GetParam();
    ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
    ScopedEnv windowBytes("COIL_PEER_WINDOW_BYTES", s.windows ? "4096" : "0");
    ScopedEnv sharing("COIL_PEER_IPC", s.legacy ? "legacy" : "auto");
    runRanks(s.ranks, [&](coilComm_t comm, int rank) {
      body(comm, rank, s.windows && s.ranks.nranks > 1);
    });
  }
};

TEST_P(FakeGpuComm, AllReducesOnDeviceBuffersMatchTheReference) {
  const FakeGpuSetup s = GetParam();
  run([&](coilComm_t comm, int rank, bool expected) {
    // Every rank of these has the (fake) GPU and all are on this host: the
    // windows exist exactly when they are asked for, for more than one rank.
    ASSERT_EQ(comm->peerWindows != nullptr, expected) << "rank " << rank;
    if (expected) {
      ASSERT_EQ(comm->peerWindows->windows.size(), static_cast<size_t>(s.ranks.nranks));
      EXPECT_EQ(comm->peerWindows->slotBytes, 4096u);
      EXPECT_NE(std::string(comm->peerWindows->sharing).find(s.legacy ? "legacy" : "cuMem"),
                std::string::npos)
          << comm->peerWindows->sharing;
    }
    allReduceEveryCase(comm, rank, s.ranks.nranks);
  });
}

TEST_P(FakeGpuComm, EveryOtherCollectiveOnDeviceBuffersMatchesTheReference) {
  run([&](coilComm_t comm, int rank, bool windows) {
    everyOtherCollective(comm, rank, GetParam().ranks.nranks, windows);
  });
}

// NCCL's habit of grouping calls: in one group, an all-reduce, a
// reduce-scatter of its result with a pre-multiplied sum (staged: the peer
// windows take built-in ops only), an all-gather of that, and a ring of
// sends and receives of the gathered buffer (staged). Each reads what the
// one before wrote, so the calls must keep their order on the stream
// across the two paths; the two with built-in ops take the windows.
void groupOfDependentCalls(coilComm_t comm, int rank, int n, bool onWindows) {
  const size_t block = 1031, count = block * static_cast<size_t>(n);
  const auto in = makeInput(coilFloat32, coilSum, rank, n, count);
  const auto sum = makeExpected(coilFloat32, coilSum, n, count);
  FakeDeviceBuffer x(count * 4), y(block * 4), z(count * 4), fromLeft(count * 4);
  std::memcpy(x.get(), in.data(), count * 4);
  device::Stream stream = device::createStream();
  float two = 2.0f;
  coilRedOp_t doubled;
  ASSERT_EQ(coilRedOpCreatePreMulSum(&doubled, &two, coilFloat32, coilScalarHostImmediate, comm),
            coilSuccess)
      << coilGetLastError(comm);
  const uint64_t before = comm->peerWindows ? comm->peerWindows->callsRun.load() : 0;
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  ASSERT_EQ(coilAllReduce(x.get(), x.get(), count, coilFloat32, coilSum, comm, stream),
            coilSuccess);
  ASSERT_EQ(coilReduceScatter(x.get(), y.get(), block, coilFloat32, doubled, comm, stream),
            coilSuccess);
  ASSERT_EQ(coilAllGather(y.get(), z.get(), block, coilFloat32, comm, stream), coilSuccess);
  if (n > 1) {
    ASSERT_EQ(coilSend(z.get(), count, coilFloat32, right, comm, stream), coilSuccess);
    ASSERT_EQ(coilRecv(fromLeft.get(), count, coilFloat32, left, comm, stream), coilSuccess);
  }
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(comm);
  ASSERT_NO_FATAL_FAILURE(expectStreamRanClean(comm, stream));
  const uint64_t after = comm->peerWindows ? comm->peerWindows->callsRun.load() : 0;
  EXPECT_EQ(after - before, onWindows ? 2u : 0u);
  // z = 2 n x, where x is the all-reduce's result; the ring's copy equals it.
  std::vector<float> want(count);
  for (size_t i = 0; i < count; ++i) {
    float s = 0;
    std::memcpy(&s, sum.data() + i * 4, 4);
    want[i] = 2.0f * static_cast<float>(n) * s;
  }
  ASSERT_EQ(firstMismatch(coilFloat32, z.get(), want.data(), count), SIZE_MAX);
  if (n > 1) {
    ASSERT_EQ(firstMismatch(coilFloat32, fromLeft.get(), want.data(), count), SIZE_MAX);
  }
  ASSERT_EQ(coilRedOpDestroy(doubled, comm), coilSuccess);
  device::destroyStream(stream);
}

TEST_P(FakeGpuComm, CallsInAGroupTakeThePeerWindowsAndKeepTheirOrder) {
  run([&](coilComm_t comm, int rank, bool windows) {
    groupOfDependentCalls(comm, rank, GetParam().ranks.nranks, windows);
  });
}

// Sends and receives of device buffers in one group: every rank sends
// three messages to every rank (itself too) and receives three from each,
// all sends posted before the receives. The first spans several pieces of
// a 4 KiB slot's partition, the second is a few elements, the third empty
// (staged: the windows take messages of a byte or more). Each message's
// size depends on both ranks, so a message matched to the wrong send shows.
size_t messageCount(int from, int to, int k) {
  const size_t f = static_cast<size_t>(from), t = static_cast<size_t>(to);
  return k == 0 ? 3001 + 13 * f + 7 * t : k == 1 ? 1 + f + 2 * t : 0;
}
int32_t messageValue(int from, int to, int k, size_t i) {
  return static_cast<int32_t>(from * 1000003 + to * 10007 + k * 1009 + static_cast<int>(i));
}

void groupedSendsAndReceives(coilComm_t comm, int rank, int n, bool onWindows) {
  device::Stream stream = device::createStream();
  std::vector<std::unique_ptr<FakeDeviceBuffer>> out, in;
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  for (int q = 0; q < n; ++q)
    for (int k = 0; k < 3; ++k) {
      const size_t count = messageCount(rank, q, k);
      out.push_back(std::make_unique<FakeDeviceBuffer>(count * 4 + 4));
      for (size_t i = 0; i < count; ++i) {
        const int32_t v = messageValue(rank, q, k, i);
        std::memcpy(out.back()->get() + i * 4, &v, 4);
      }
      ASSERT_EQ(coilSend(out.back()->get(), count, coilInt32, q, comm, stream), coilSuccess)
          << coilGetLastError(comm);
    }
  for (int q = 0; q < n; ++q)
    for (int k = 0; k < 3; ++k) {
      in.push_back(std::make_unique<FakeDeviceBuffer>(messageCount(q, rank, k) * 4 + 4));
      ASSERT_EQ(coilRecv(in.back()->get(), messageCount(q, rank, k), coilInt32, q, comm, stream),
                coilSuccess)
          << coilGetLastError(comm);
    }
  const uint64_t before = comm->peerWindows ? comm->peerWindows->p2pRun.load() : 0;
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(comm);
  ASSERT_NO_FATAL_FAILURE(expectStreamRanClean(comm, stream));
  const uint64_t after = comm->peerWindows ? comm->peerWindows->p2pRun.load() : 0;
  EXPECT_EQ(after - before, onWindows ? 1u : 0u);
  for (int q = 0; q < n; ++q)
    for (int k = 0; k < 3; ++k) {
      const uint8_t* got = in[static_cast<size_t>(q * 3 + k)]->get();
      for (size_t i = 0; i < messageCount(q, rank, k); ++i) {
        int32_t v = 0;
        std::memcpy(&v, got + i * 4, 4);
        ASSERT_EQ(v, messageValue(q, rank, k, i)) << "from rank " << q << ", message " << k
                                                  << ", element " << i;
      }
    }
  device::destroyStream(stream);
}

TEST_P(FakeGpuComm, SendsAndReceivesInAGroupTakeThePeerWindows) {
  run([&](coilComm_t comm, int rank, bool windows) {
    groupedSendsAndReceives(comm, rank, GetParam().ranks.nranks, windows);
  });
}

// Runs body(comm, rank) on kBothWaysRanks ranks over shm, as threads and
// then as processes, with 4 KiB peer windows taking calls of `minBytes`
// bytes and more.
constexpr int kBothWaysRanks = 3;
void onRanksBothWays(const char* minBytes, const std::function<void(coilComm_t, int)>& body) {
  ScopedEnv min("COIL_PEER_MIN_BYTES", minBytes);
  ScopedEnv windowBytes("COIL_PEER_WINDOW_BYTES", "4096");
  for (Launch launch : {Launch::Threads, Launch::Processes}) {
    SCOPED_TRACE(launch == Launch::Threads ? "threads" : "processes");
    runRanks({kBothWaysRanks, launch, "shm"}, body);
  }
}

// A group of three paths at once: a small all-reduce (staged: below
// COIL_PEER_MIN_BYTES), a large message to the next rank (the windows) and a
// small one (staged again). The staged collective runs as a job of its own
// before the windows' batch and the staged message as one after it, and
// each job must find every buffer it touches staged. (The staged message's
// buffers went with the collective's job, and its own job read and wrote
// through null pointers: a crash, found by fake_gpu_random_program_test.)
TEST(FakeGpuCommGroups, AStagedCallAndMessagesOnBothPathsInOneGroup) {
  onRanksBothWays("4096", [](coilComm_t comm, int rank) {
    constexpr int n = kBothWaysRanks;
    ASSERT_NE(comm->peerWindows, nullptr);
    const size_t small = 7, large = 3001;
    const auto in = makeInput(coilInt32, coilSum, rank, n, small);
    const auto want = makeExpected(coilInt32, coilSum, n, small);
    FakeDeviceBuffer sum(small * 4), bigOut(large * 4), bigIn(large * 4), smallOut(small * 4),
        smallIn(small * 4);
    std::memcpy(sum.get(), in.data(), small * 4);
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    for (size_t i = 0; i < large; ++i) {
      const int32_t v = messageValue(rank, next, 0, i);
      std::memcpy(bigOut.get() + i * 4, &v, 4);
    }
    for (size_t i = 0; i < small; ++i) {
      const int32_t v = messageValue(rank, next, 1, i);
      std::memcpy(smallOut.get() + i * 4, &v, 4);
    }
    device::Stream stream = device::createStream();
    const uint64_t before = comm->peerWindows->p2pRun.load();
    ASSERT_EQ(coilGroupStart(), coilSuccess);
    ASSERT_EQ(coilAllReduce(sum.get(), sum.get(), small, coilInt32, coilSum, comm, stream),
              coilSuccess);
    ASSERT_EQ(coilSend(bigOut.get(), large, coilInt32, next, comm, stream), coilSuccess);
    ASSERT_EQ(coilSend(smallOut.get(), small, coilInt32, next, comm, stream), coilSuccess);
    ASSERT_EQ(coilRecv(bigIn.get(), large, coilInt32, prev, comm, stream), coilSuccess);
    ASSERT_EQ(coilRecv(smallIn.get(), small, coilInt32, prev, comm, stream), coilSuccess);
    ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(comm);
    ASSERT_NO_FATAL_FAILURE(expectStreamRanClean(comm, stream));
    EXPECT_EQ(comm->peerWindows->p2pRun.load() - before, 1u);
    ASSERT_EQ(firstMismatch(coilInt32, sum.get(), want.data(), small), SIZE_MAX);
    for (size_t i = 0; i < large; ++i) {
      int32_t v = 0;
      std::memcpy(&v, bigIn.get() + i * 4, 4);
      ASSERT_EQ(v, messageValue(prev, rank, 0, i)) << "large message, element " << i;
    }
    for (size_t i = 0; i < small; ++i) {
      int32_t v = 0;
      std::memcpy(&v, smallIn.get() + i * 4, 4);
      ASSERT_EQ(v, messageValue(prev, rank, 1, i)) << "small message, element " << i;
    }
    device::destroyStream(stream);
  });
}

// A non-blocking split whose child shares the parent's links (splitShare):
// the parent goes on with calls on its stream at once, while the child
// joins and makes its peer windows. The child's setup must not run
// collectives of its own on the links the parent is using (it did: the
// parent's calls then failed, "the link ... is in use by another
// communicator that shares it"; the random programs found it).
TEST(FakeGpuCommSplits, ANonBlockingSharedChildJoinsWhileItsParentRunsOnItsStream) {
  onRanksBothWays("1024", [](coilComm_t comm, int rank) {
    constexpr int n = kBothWaysRanks;
    device::Stream stream = device::createStream();
    // An in-place all-reduce of `count` int32 on `c`, on the stream, checked.
    auto allReduceChecked = [&](coilComm_t c, size_t count, const char* who) {
      const auto in = makeInput(coilInt32, coilSum, rank, n, count);
      const auto want = makeExpected(coilInt32, coilSum, n, count);
      FakeDeviceBuffer buf(count * 4);
      std::memcpy(buf.get(), in.data(), count * 4);
      ASSERT_EQ(coilAllReduce(buf.get(), buf.get(), count, coilInt32, coilSum, c, stream),
                coilSuccess)
          << coilGetLastError(c);
      ASSERT_NO_FATAL_FAILURE(expectStreamRanClean(c, stream));
      ASSERT_EQ(firstMismatch(coilInt32, buf.get(), want.data(), count), SIZE_MAX)
          << who << "'s all-reduce of " << count;
    };
    for (int round = 0; round < 4; ++round) {
      SCOPED_TRACE(::testing::Message() << "round " << round);
      coilConfig_t config = COIL_CONFIG_INITIALIZER;
      config.splitShare = 1;
      config.blocking = 0;
      coilComm_t child = nullptr;
      const coilResult_t split = coilCommSplit(comm, 0, rank, &child, &config);
      ASSERT_TRUE(split == coilSuccess || split == coilInProgress) << coilGetLastError(comm);
      // The parent's calls, small (staged) and large (the windows), at once.
      for (size_t count : {size_t{7}, size_t{3001}, size_t{1}, size_t{2049}})
        ASSERT_NO_FATAL_FAILURE(allReduceChecked(comm, count, "the parent"));
      ASSERT_EQ(waitReady(child, 60), coilSuccess) << coilGetLastError(child);
      ASSERT_NO_FATAL_FAILURE(allReduceChecked(child, 3001, "the child"));
      EXPECT_NE(child->peerWindows, nullptr);
      ASSERT_EQ(coilCommDestroy(child), coilSuccess);
    }
    device::destroyStream(stream);
  });
}

// A send and a receive of different sizes through the windows: both ranks'
// calls fail, each naming the problem, instead of one copying too little
// and the other waiting out its deadline.
TEST(FakeGpuCommFaults, ASendAndItsReceiveOfDifferentSizesFailBothRanks) {
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
  ScopedEnv windowBytes("COIL_PEER_WINDOW_BYTES", "4096");
  runRanks({2, Launch::Processes, "shm"}, [&](coilComm_t comm, int rank) {
    ASSERT_NE(comm->peerWindows, nullptr);
    FakeDeviceBuffer buf(3001 * 4);
    device::Stream stream = device::createStream();
    ASSERT_EQ(coilGroupStart(), coilSuccess);
    if (rank == 0) ASSERT_EQ(coilSend(buf.get(), 3001, coilInt32, 1, comm, stream), coilSuccess);
    else ASSERT_EQ(coilRecv(buf.get(), 3000, coilInt32, 0, comm, stream), coilSuccess);
    ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(comm);
    const std::string why = streamFailedWith(comm, stream, coilInvalidUsage);
    EXPECT_NE(why.find(rank == 0 ? "rank 1 receives a message of another size"
                                 : "rank 0 sends a message of 12004 bytes where this rank "
                                   "receives 12000 bytes"),
              std::string::npos)
        << why;
    device::destroyStream(stream);
  });
}

// NCCL's single-thread pattern: one thread makes every rank
// (coilCommInitAll) and, in one group, calls an all-reduce and an
// all-gather on each rank's stream. The ranks share the one fake GPU in one
// process (host order), so each runs on a thread of its own at the group's
// end; the peer windows take every call.
TEST(FakeGpuCommGroups, OneThreadDrivesEveryRankThroughTheWindows) {
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
  ScopedEnv windowBytes("COIL_PEER_WINDOW_BYTES", "4096");
  constexpr int n = 3;
  const size_t count = 2053;
  std::vector<coilComm_t> comms(n);
  ASSERT_EQ(coilCommInitAll(comms.data(), n, nullptr), coilSuccess) << coilGetLastError(nullptr);
  std::vector<device::Stream> streams;
  std::vector<std::unique_ptr<FakeDeviceBuffer>> sums, gathered;
  for (int r = 0; r < n; ++r) {
    ASSERT_NE(comms[r]->peerWindows, nullptr);
    streams.push_back(device::createStream());
    sums.push_back(std::make_unique<FakeDeviceBuffer>(count * 4));
    gathered.push_back(std::make_unique<FakeDeviceBuffer>(count * 4 * n));
    const auto in = makeInput(coilInt32, coilMax, r, n, count);
    std::memcpy(sums[r]->get(), in.data(), count * 4);
  }
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(coilAllReduce(sums[r]->get(), sums[r]->get(), count, coilInt32, coilMax, comms[r],
                            streams[r]),
              coilSuccess);
    ASSERT_EQ(coilAllGather(sums[r]->get(), gathered[r]->get(), count, coilInt32, comms[r],
                            streams[r]),
              coilSuccess);
  }
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(nullptr);
  const auto want = makeExpected(coilInt32, coilMax, n, count);
  for (int r = 0; r < n; ++r) {
    device::syncStream(streams[r]);
    coilResult_t async = coilSuccess;
    ASSERT_EQ(coilCommGetAsyncError(comms[r], &async), coilSuccess);
    ASSERT_EQ(async, coilSuccess) << coilGetLastError(comms[r]);
    EXPECT_EQ(comms[r]->peerWindows->callsRun.load(), 2u) << "rank " << r;
    ASSERT_EQ(firstMismatch(coilInt32, sums[r]->get(), want.data(), count), SIZE_MAX);
    for (int q = 0; q < n; ++q)
      ASSERT_EQ(firstMismatch(coilInt32, gathered[r]->get() + q * count * 4, want.data(), count),
                SIZE_MAX)
          << "rank " << r << ", block " << q;
    device::destroyStream(streams[r]);
  }
  for (coilComm_t c : comms) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
}

std::vector<FakeGpuSetup> setups() {
  std::vector<FakeGpuSetup> out;
  for (Launch launch : {Launch::Threads, Launch::Processes}) {
    for (int n : {1, 2, 3, 5}) out.push_back({{n, launch, "shm"}, true});
    out.push_back({{3, launch, "tcp"}, true});
    out.push_back({{3, launch, "shm"}, false});
    // Legacy IPC: processes open each other's handles; threads of one
    // process use each other's addresses.
    for (int n : {2, 3, 5}) out.push_back({{n, launch, "shm"}, true, true});
    out.push_back({{3, launch, "tcp"}, true, true});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, FakeGpuComm, ::testing::ValuesIn(setups()), name);

// Rank 0's settings count: a rank with other values still takes part.
TEST(FakeGpuCommSettings, RankZerosWindowSettingsHoldOnEveryRank) {
  runRanksRaw({2, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    ScopedEnv windowBytes("COIL_PEER_WINDOW_BYTES", rank == 0 ? "8192" : "0");
    ScopedEnv minBytes("COIL_PEER_MIN_BYTES", rank == 0 ? "4" : "999999");
    coilComm_t comm = initWithTimeout(id, 2, rank, 30000);
    ASSERT_NE(comm, nullptr);
    ASSERT_NE(comm->peerWindows, nullptr);
    EXPECT_EQ(comm->peerWindows->slotBytes, 8192u);
    EXPECT_EQ(comm->peerWindows->minBytes, 4u);
    allReduceEveryCase(comm, rank, 2);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

// The windows' sharing on one rank, as init left it.
std::string sharingOf(coilComm_t comm) {
  return comm->peerWindows ? comm->peerWindows->sharing : "staged";
}

// Three processes, each calling `setUp` (its rank) before init: every rank
// must end with the windows shared as `want` says ("staged": none), and
// every call right. (Processes: what setUp changes stays in its rank.)
void threeRanksShare(const std::function<void(int rank)>& setUp, const std::string& want) {
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
  runRanksRaw({3, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    setUp(rank);
    coilComm_t comm = initWithTimeout(id, 3, rank, 30000);
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(sharingOf(comm), want) << "rank " << rank;
    allReduceEveryCase(comm, rank, 3);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

// One rank whose driver cannot export cuMem memory: every rank falls back
// to legacy IPC handles (they agree at init).
TEST(FakeGpuCommSettings, OneRankWithoutCuMemMeansLegacyIpcEverywhere) {
  threeRanksShare(
      [](int rank) {
        if (rank == 1) device::fake::refuseSharedMemory("this driver cannot export memory");
      },
      "legacy CUDA IPC handles");
}

// A rank that exports its own window but cannot map the others': the
// mappings made so far are undone on every rank, and legacy IPC follows.
TEST(FakeGpuCommSettings, ARankThatCannotMapPeersMeansLegacyIpcEverywhere) {
  threeRanksShare(
      [](int rank) {
        if (rank == 2) device::fake::failImports("cuMemImportFromShareableHandle: refused");
      },
      "legacy CUDA IPC handles");
}

// COIL_PEER_IPC=cumem (rank 0's) rules the fallback out: staged instead.
TEST(FakeGpuCommSettings, CuMemOnlyWithoutCuMemMeansStaged) {
  threeRanksShare(
      [](int rank) {
        setenv("COIL_PEER_IPC", rank == 0 ? "cumem" : "legacy", 1);
        if (rank == 1) device::fake::refuseSharedMemory("this driver cannot export memory");
      },
      "staged");
}

// Neither way on one rank: no rank uses the windows, and every call is
// staged.
TEST(FakeGpuCommSettings, OneRankWithNeitherWayMeansNoWindowsAnywhere) {
  threeRanksShare(
      [](int rank) {
        if (rank != 1) return;
        device::fake::refuseSharedMemory("this driver cannot export memory");
        device::fake::refuseIpc("cudaErrorNotSupported");
      },
      "staged");
}

// Ranks that disagree on a call's count: every rank's call fails, naming
// the mismatch, instead of running different numbers of steps over each
// other's slots.
TEST(FakeGpuCommFaults, RanksThatDisagreeOnTheCountFailTheirCalls) {
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
  ScopedEnv windowBytes("COIL_PEER_WINDOW_BYTES", "4096");
  runRanks({2, Launch::Processes, "shm"}, [&](coilComm_t comm, int rank) {
    ASSERT_NE(comm->peerWindows, nullptr);
    const size_t count = rank == 0 ? 3001 : 3000;
    FakeDeviceBuffer send(count * 4), recv(count * 4);
    std::memset(send.get(), 1, count * 4);
    device::Stream stream = device::createStream();
    ASSERT_EQ(coilAllReduce(send.get(), recv.get(), count, coilInt32, coilSum, comm, stream),
              coilSuccess);
    const std::string why = streamFailedWith(comm, stream, coilInvalidUsage);
    EXPECT_NE(why.find("different arguments"), std::string::npos) << why;
    device::destroyStream(stream);
  });
}

// Ranks that disagree on a broadcast's root: every rank's call fails,
// naming the mismatch, instead of each copying from a different rank's
// slot (or from one that no rank filled).
TEST(FakeGpuCommFaults, RanksThatDisagreeOnTheRootFailTheirCalls) {
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
  ScopedEnv windowBytes("COIL_PEER_WINDOW_BYTES", "4096");
  runRanks({3, Launch::Processes, "shm"}, [&](coilComm_t comm, int rank) {
    ASSERT_NE(comm->peerWindows, nullptr);
    const size_t count = 1031;
    FakeDeviceBuffer buf(count * 4);
    std::memset(buf.get(), rank, count * 4);
    device::Stream stream = device::createStream();
    const int root = rank == 2 ? 1 : 0;
    ASSERT_EQ(coilBroadcast(buf.get(), buf.get(), count, coilInt32, root, comm, stream),
              coilSuccess);
    const std::string why = streamFailedWith(comm, stream, coilInvalidUsage);
    EXPECT_NE(why.find("coilBroadcast (enqueued on a stream): the ranks called it with "
                       "different arguments"),
              std::string::npos)
        << why;
    device::destroyStream(stream);
  });
}

// A rank that dies after init: its peers' calls on the windows fail (the
// barrier between phases, or the pair's token, notices the dead process)
// and become their asynchronous error; their streams still go on. Every
// collective, and sends and receives in a group (a ring: rank 0 receives
// from the dead rank 2, rank 1 sends to it).
enum class DyingPeerCall { kCollective, kGroupedRing };
struct DyingPeerCase {
  DyingPeerCall what;
  algo::CollKind kind;  // kCollective's
  const char* name;     // in the error: the call that failed
};

class FakeGpuCommDeadPeer : public ::testing::TestWithParam<DyingPeerCase> {};

TEST_P(FakeGpuCommDeadPeer, ARankThatDiesFailsItsPeersCalls) {
  const DyingPeerCase& param = GetParam();
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
  ScopedEnv windowBytes("COIL_PEER_WINDOW_BYTES", "4096");
  // Ranks 0 and 1 count themselves out of init here (memory the forked
  // ranks share, outside coil) before rank 2 dies: dying while a peer is
  // still in init's last collective fails that peer's init instead.
  void* shared = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* initialized = new (shared) std::atomic<int>(0);
  constexpr int kRanks = 3;
  runRanksRaw({kRanks, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, kRanks, rank, 30000);
    ASSERT_NE(comm, nullptr);
    ASSERT_NE(comm->peerWindows, nullptr);
    if (rank == 2) {
      const auto since = Clock::now();
      while (initialized->load() < 2 && secondsSince(since) < 20.0) usleep(100);
      _exit(0);  // gone, without a word to the others
    }
    initialized->fetch_add(1);
    device::Stream stream = device::createStream();
    const auto start = Clock::now();
    const size_t count = 3001;  // several window pieces
    // Alive until the stream has run (as a GPU's buffers must be).
    const CollectiveCase c{param.kind, coilInt32, coilSum, count, 0, false};
    FakeDeviceBuffer send(inputElems(c, kRanks) * 4), recv(outputElems(c, kRanks) * 4);
    if (param.what == DyingPeerCall::kCollective) {
      const PlacedCall b = placeCall(c, rank, kRanks, send.get(), recv.get());
      ASSERT_EQ(callCollective(c, b, comm, stream), coilSuccess) << coilGetLastError(comm);
    } else {
      ASSERT_EQ(coilGroupStart(), coilSuccess);
      ASSERT_EQ(coilSend(send.get(), count, coilInt32, (rank + 1) % kRanks, comm, stream),
                coilSuccess);
      ASSERT_EQ(coilRecv(recv.get(), count, coilInt32, (rank + kRanks - 1) % kRanks, comm, stream),
                coilSuccess);
      ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(comm);
    }
    device::syncStream(stream);  // released, not held: the call failed
    coilResult_t async = coilSuccess;
    ASSERT_EQ(coilCommGetAsyncError(comm, &async), coilSuccess);
    EXPECT_NE(async, coilSuccess);
    const std::string why = coilGetLastError(comm);
    EXPECT_NE(why.find(param.name), std::string::npos) << why;
    EXPECT_LT(secondsSince(start), 20.0);
    device::destroyStream(stream);
    coilCommAbort(comm);
  });
  munmap(shared, sizeof(std::atomic<int>));
}

INSTANTIATE_TEST_SUITE_P(
    EveryCall, FakeGpuCommDeadPeer,
    ::testing::Values(
        DyingPeerCase{DyingPeerCall::kCollective, algo::CollKind::AllReduce, "coilAllReduce"},
        DyingPeerCase{DyingPeerCall::kCollective, algo::CollKind::AllGather, "coilAllGather"},
        DyingPeerCase{DyingPeerCall::kCollective, algo::CollKind::ReduceScatter,
                      "coilReduceScatter"},
        DyingPeerCase{DyingPeerCall::kCollective, algo::CollKind::Broadcast, "coilBroadcast"},
        DyingPeerCase{DyingPeerCall::kCollective, algo::CollKind::Reduce, "coilReduce"},
        DyingPeerCase{DyingPeerCall::kCollective, algo::CollKind::AllToAll, "coilAlltoAll"},
        DyingPeerCase{DyingPeerCall::kCollective, algo::CollKind::Gather, "coilGather"},
        DyingPeerCase{DyingPeerCall::kCollective, algo::CollKind::Scatter, "coilScatter"},
        DyingPeerCase{DyingPeerCall::kGroupedRing, algo::CollKind::AllReduce, "coilGroupEnd"}),
    [](const ::testing::TestParamInfo<DyingPeerCase>& info) {
      return std::string(info.param.name + 4) +
             (info.param.what == DyingPeerCall::kGroupedRing ? "SendRecvRing" : "");
    });

}  // namespace
}  // namespace coil::test
