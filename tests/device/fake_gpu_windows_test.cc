// Windows (coilCommWindowRegister, api/registered_windows.h) on the fake
// GPU (fake_device.cc): each rank's buffers registered together, mapped by
// the others (legacy IPC handles opened through /proc between processes;
// the address as is between threads), and the all-reduce, all-gather,
// reduce-scatter, broadcast, reduce and all-to-all that read the peers'
// buffers in place (algorithms/registered_collectives.h). Ranks as threads and as
// processes, over shm and tcp, at awkward sizes and rank counts, in place
// and out, checked bit for bit against the reference; then the ways
// registration and calls must fail: different sizes, a bad buffer on one
// rank, buffers at different places, a buffer that cannot be exported.
// What this cannot show is CUDA itself: the gpu suite's runs and
// coil_perf -R 2 do, on a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "api/handle.h"
#include "device/device.h"
#include "harness/reference.h"
#include "harness/run_ranks.h"
#include "tests/device/fake_device.h"
#include "tests/device/staged_between.h"

namespace coil::test {
namespace {

using device::fake::DeviceBuffer;

constexpr size_t kWindowBytes = 64 << 10;

struct Case {
  coilDataType_t type;
  coilRedOp_t op;
  size_t count;
  bool inPlace;
  size_t offset;  // of the buffers in their windows, the same on every rank
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {coilInt32, coilSum, 1, false, 0},        {coilInt32, coilSum, 2, true, 4},
      {coilInt32, coilSum, 131, false, 256},    {coilFloat32, coilAvg, 3001, false, 1024},
      {coilBfloat16, coilMax, 2999, true, 2},   {coilInt64, coilProd, 53, false, 8},
      {coilUint8, coilMin, 4099, true, 3},      {coilFloat64, coilSum, 8191, false, 0},
      {coilFloat16, coilSum, 7, false, 30000},  {coilInt32, coilBor, 1031, false, 4},
      {coilUint64, coilBxor, 977, true, 0},
  };
  return all;
}

coilResult_t asyncErrorOf(coilComm_t comm) {
  coilResult_t async = coilSuccess;
  EXPECT_EQ(coilCommGetAsyncError(comm, &async), coilSuccess);
  return async;
}

// Two windows in one allocation (so that a process opens each peer's
// allocation once for both), registered on every rank.
struct TwoWindows {
  DeviceBuffer memory{2 * kWindowBytes + 256};
  coilWindow_t in = nullptr, out = nullptr;
  uint8_t* inBase() const { return memory.get() + 256; }
  uint8_t* outBase() const { return memory.get() + 256 + kWindowBytes; }
};

void registerBoth(coilComm_t comm, TwoWindows& w) {
  ASSERT_EQ(coilCommWindowRegister(comm, w.inBase(), kWindowBytes, &w.in, COIL_WIN_DEFAULT),
            coilSuccess)
      << coilGetLastError(comm);
  ASSERT_EQ(coilCommWindowRegister(comm, w.outBase(), kWindowBytes, &w.out,
                                   COIL_WIN_COLL_SYMMETRIC),
            coilSuccess)
      << coilGetLastError(comm);
}

// Every case on the windows; `onWindows`: whether each must take the
// in-place path (else another path, and still the right bits).
void allReduceEveryCase(coilComm_t comm, int rank, int nranks, TwoWindows& w, bool onWindows) {
  device::Stream stream = device::createStream();
  for (const Case& c : cases()) {
    SCOPED_TRACE(::testing::Message() << nameOf(c.type) << " " << nameOf(c.op) << " count "
                                      << c.count << (c.inPlace ? " in place" : "") << " at "
                                      << c.offset);
    const size_t bytes = c.count * sizeOf(c.type);
    const auto in = makeInput(c.type, c.op, rank, nranks, c.count);
    const auto want = makeExpected(c.type, c.op, nranks, c.count);
    uint8_t* send = w.inBase() + c.offset;
    uint8_t* recv = c.inPlace ? send : w.outBase() + c.offset;
    std::memcpy(send, in.data(), bytes);
    const uint64_t before = comm->windows->callsRun.load();
    ASSERT_EQ(coilAllReduce(send, recv, c.count, c.type, c.op, comm, stream), coilSuccess)
        << coilGetLastError(comm);
    EXPECT_EQ(comm->windows->callsRun.load() - before, onWindows ? 1u : 0u);
    device::syncStream(stream);
    ASSERT_EQ(asyncErrorOf(comm), coilSuccess) << coilGetLastError(comm);
    ASSERT_EQ(firstMismatch(c.type, recv, want.data(), c.count), SIZE_MAX);

    expectStagedAllGather(comm, rank, nranks, static_cast<int32_t>(c.count), stream);
  }
  device::destroyStream(stream);
}

// All-gathers and reduce-scatters on windows: only the buffers the peers
// read are in one (an all-gather's outputs, a reduce-scatter's inputs; the
// other buffer is a plain device buffer, or in place), every block checked.
void gatherAndScatterEveryCase(coilComm_t comm, int rank, int nranks, TwoWindows& w,
                               bool onWindows) {
  device::Stream stream = device::createStream();
  constexpr size_t kAt = 64;  // the same place in the windows on every rank
  for (size_t count : {size_t{1}, size_t{7}, size_t{131}, size_t{1000}})
    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << (inPlace ? " in place" : ""));
      const size_t bytes = count * sizeof(int32_t);
      uint64_t before = comm->windows->callsRun.load();

      // All-gather: block q of every output is rank q's tagged values.
      uint8_t* gathered = w.outBase() + kAt;
      DeviceBuffer plainInput(bytes);
      uint8_t* send = inPlace ? gathered + rank * bytes : plainInput.get();
      for (size_t i = 0; i < count; ++i) {
        const int32_t v = rank * 100000 + static_cast<int32_t>(i);
        std::memcpy(send + i * sizeof v, &v, sizeof v);
      }
      ASSERT_EQ(coilAllGather(send, gathered, count, coilInt32, comm, stream), coilSuccess)
          << coilGetLastError(comm);
      EXPECT_EQ(comm->windows->callsRun.load() - before, onWindows ? 1u : 0u);
      device::syncStream(stream);
      ASSERT_EQ(asyncErrorOf(comm), coilSuccess) << coilGetLastError(comm);
      for (int q = 0; q < nranks; ++q)
        for (size_t i = 0; i < count; ++i) {
          int32_t got = 0;
          std::memcpy(&got, gathered + q * bytes + i * sizeof got, sizeof got);
          ASSERT_EQ(got, q * 100000 + static_cast<int32_t>(i)) << "block " << q << " element " << i;
        }

      // Reduce-scatter, two types and ops, against the reference.
      for (auto [type, op] : {std::pair{coilFloat32, coilSum}, std::pair{coilBfloat16, coilMax}}) {
        SCOPED_TRACE(::testing::Message() << nameOf(type) << " " << nameOf(op));
        const size_t block = count * sizeOf(type);
        const auto in = makeInput(type, op, rank, nranks, count * nranks);
        const auto want = makeExpected(type, op, nranks, count * nranks);
        uint8_t* inputs = w.inBase() + kAt;
        std::memcpy(inputs, in.data(), block * nranks);
        DeviceBuffer plainOutput(block);
        uint8_t* recv = inPlace ? inputs + rank * block : plainOutput.get();
        before = comm->windows->callsRun.load();
        ASSERT_EQ(coilReduceScatter(inputs, recv, count, type, op, comm, stream), coilSuccess)
            << coilGetLastError(comm);
        EXPECT_EQ(comm->windows->callsRun.load() - before, onWindows ? 1u : 0u);
        device::syncStream(stream);
        ASSERT_EQ(asyncErrorOf(comm), coilSuccess) << coilGetLastError(comm);
        ASSERT_EQ(firstMismatch(type, recv, want.data() + rank * block, count), SIZE_MAX);
      }
    }
  device::destroyStream(stream);
}

// Broadcasts, reduces and all-to-alls on windows: the buffers the peers
// read in a window (a broadcast's outputs, the inputs of the others), the
// other buffer plain or in place, and the ranks that are not the root
// passing no buffer they do not use; two roots, every element checked.
void rootedAndAllToAllEveryCase(coilComm_t comm, int rank, int nranks, TwoWindows& w,
                                bool onWindows) {
  device::Stream stream = device::createStream();
  constexpr size_t kAt = 128;  // the same place in the windows on every rank
  auto expectRun = [&](uint64_t before, bool windows) {
    EXPECT_EQ(comm->windows->callsRun.load() - before, windows ? 1u : 0u);
    device::syncStream(stream);
    ASSERT_EQ(asyncErrorOf(comm), coilSuccess) << coilGetLastError(comm);
  };
  for (size_t count : {size_t{1}, size_t{7}, size_t{131}, size_t{1000}})
    for (bool inPlace : {false, true})
      for (int root : {0, nranks - 1}) {
        SCOPED_TRACE(::testing::Message() << "count " << count << (inPlace ? " in place" : "")
                                          << " root " << root);
        const bool isRoot = rank == root;
        const size_t bytes = count * sizeof(int32_t);
        auto valueAt = [](size_t i, int a, int b) {
          return a * 1000000 + b * 10000 + static_cast<int32_t>(i);
        };

        // Broadcast: every output is the root's values, over stale bytes.
        uint8_t* out = w.outBase() + kAt;
        std::memset(out, 0xEE, bytes);
        DeviceBuffer plainInput(bytes);
        uint8_t* send = isRoot ? (inPlace ? out : plainInput.get()) : nullptr;
        for (size_t i = 0; isRoot && i < count; ++i) {
          const int32_t v = valueAt(i, root, 7);
          std::memcpy(send + i * sizeof v, &v, sizeof v);
        }
        uint64_t before = comm->windows->callsRun.load();
        ASSERT_EQ(coilBroadcast(send, out, count, coilInt32, root, comm, stream), coilSuccess)
            << coilGetLastError(comm);
        expectRun(before, onWindows);
        for (size_t i = 0; i < count; ++i) {
          int32_t got = 0;
          std::memcpy(&got, out + i * sizeof got, sizeof got);
          ASSERT_EQ(got, valueAt(i, root, 7)) << "broadcast element " << i;
        }

        // Reduce, two types and ops, against the reference.
        for (auto [type, op] : {std::pair{coilFloat32, coilSum}, std::pair{coilInt64, coilMax}}) {
          SCOPED_TRACE(::testing::Message() << "reduce " << nameOf(type) << " " << nameOf(op));
          const auto in = makeInput(type, op, rank, nranks, count);
          const auto want = makeExpected(type, op, nranks, count);
          uint8_t* inputs = w.inBase() + kAt;
          std::memcpy(inputs, in.data(), in.size());
          DeviceBuffer plainOutput(in.size());
          uint8_t* recv = isRoot ? (inPlace ? inputs : plainOutput.get()) : nullptr;
          before = comm->windows->callsRun.load();
          ASSERT_EQ(coilReduce(inputs, recv, count, type, op, root, comm, stream), coilSuccess)
              << coilGetLastError(comm);
          expectRun(before, onWindows);
          if (isRoot) {
            ASSERT_EQ(firstMismatch(type, recv, want.data(), count), SIZE_MAX);
          }
        }

        // All-to-all (no root, never in place): block q of rank r's output
        // is block r of rank q's input.
        if (root != 0 || inPlace) continue;
        uint8_t* inputs = w.inBase() + kAt;
        for (int q = 0; q < nranks; ++q)
          for (size_t i = 0; i < count; ++i) {
            const int32_t v = valueAt(i, rank, q);
            std::memcpy(inputs + q * bytes + i * sizeof v, &v, sizeof v);
          }
        uint8_t* outputs = w.outBase() + kAt;
        before = comm->windows->callsRun.load();
        ASSERT_EQ(coilAlltoAll(inputs, outputs, count, coilInt32, comm, stream), coilSuccess)
            << coilGetLastError(comm);
        expectRun(before, onWindows);
        for (int q = 0; q < nranks; ++q)
          for (size_t i = 0; i < count; ++i) {
            int32_t got = 0;
            std::memcpy(&got, outputs + q * bytes + i * sizeof got, sizeof got);
            ASSERT_EQ(got, valueAt(i, q, rank)) << "all-to-all block " << q << " element " << i;
          }
      }
  device::destroyStream(stream);
}

class FakeGpuWindows : public ::testing::TestWithParam<RankSetup> {};

TEST_P(FakeGpuWindows, CollectivesReadThePeersBuffersInPlace) {
  const RankSetup s = GetParam();
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
  runRanks(s, [&](coilComm_t comm, int rank) {
    TwoWindows w;
    registerBoth(comm, w);
    // One rank has no peer to map: registered, not mapped, calls as before.
    const bool mapped = s.nranks > 1;
    EXPECT_EQ(w.in->mapped(), mapped);
    EXPECT_EQ(w.out->mapped(), mapped);
    allReduceEveryCase(comm, rank, s.nranks, w, mapped);
    gatherAndScatterEveryCase(comm, rank, s.nranks, w, mapped);
    rootedAndAllToAllEveryCase(comm, rank, s.nranks, w, mapped);

    // Deregistered: the same buffers take the other paths, as right.
    ASSERT_EQ(coilCommWindowDeregister(comm, w.in), coilSuccess) << coilGetLastError(comm);
    ASSERT_EQ(coilCommWindowDeregister(comm, w.out), coilSuccess) << coilGetLastError(comm);
    EXPECT_TRUE(comm->windows->live.empty());
    allReduceEveryCase(comm, rank, s.nranks, w, false);
    gatherAndScatterEveryCase(comm, rank, s.nranks, w, false);
    rootedAndAllToAllEveryCase(comm, rank, s.nranks, w, false);
  });
}

std::vector<RankSetup> setups() {
  std::vector<RankSetup> out;
  for (Launch launch : {Launch::Threads, Launch::Processes}) {
    for (int n : {1, 2, 3, 5}) out.push_back({n, launch, "shm"});
    out.push_back({3, launch, "tcp"});
  }
  return out;
}

std::string name(const ::testing::TestParamInfo<RankSetup>& info) {
  return paramName(info.param);
}

INSTANTIATE_TEST_SUITE_P(Ranks, FakeGpuWindows, ::testing::ValuesIn(setups()), name);

// Windows of different sizes: every rank's registration fails, naming it,
// and the communicator goes on.
TEST(FakeGpuWindowsRefused, WindowsOfDifferentSizesFailOnEveryRank) {
  runRanks({3, Launch::Processes, "shm"}, [&](coilComm_t comm, int rank) {
    DeviceBuffer memory(kWindowBytes);
    coilWindow_t win = nullptr;
    EXPECT_EQ(coilCommWindowRegister(comm, memory.get(), rank == 1 ? 4096 : 8192, &win, 0),
              coilInvalidArgument);
    EXPECT_EQ(win, nullptr);
    EXPECT_NE(std::string(coilGetLastError(comm)).find("differ in size"), std::string::npos)
        << coilGetLastError(comm);
    ASSERT_EQ(coilCommWindowRegister(comm, memory.get(), 8192, &win, 0), coilSuccess)
        << coilGetLastError(comm);
    EXPECT_EQ(win->id, 1u);  // the failed registration took no number on any rank
    EXPECT_EQ(coilCommWindowDeregister(comm, win), coilSuccess) << coilGetLastError(comm);
  });
}

// One rank's bad arguments (host memory, a NULL out-pointer, unknown flags):
// it fails saying what is wrong, its peers fail naming it, none waits.
TEST(FakeGpuWindowsRefused, ARanksBadArgumentsFailEveryRankNamingIt) {
  runRanks({3, Launch::Threads, "shm"}, [&](coilComm_t comm, int rank) {
    DeviceBuffer memory(kWindowBytes);
    std::vector<uint8_t> host(kWindowBytes);
    struct Bad {
      const char* says;
      void* buff;
      bool nullWin;
      int flags;
    };
    for (const Bad& bad : {Bad{"not device memory", host.data(), false, 0},
                           Bad{"win is NULL", memory.get(), true, 0},
                           Bad{"winFlags 6", memory.get(), false, 6}}) {
      SCOPED_TRACE(bad.says);
      const bool me = rank == 2;
      coilWindow_t win = nullptr;
      EXPECT_EQ(coilCommWindowRegister(comm, me ? bad.buff : memory.get(), kWindowBytes,
                                       me && bad.nullWin ? nullptr : &win, me ? bad.flags : 0),
                coilInvalidArgument);
      const std::string error = coilGetLastError(comm);
      EXPECT_NE(error.find(me ? bad.says : "rank 2 refused its buffer"), std::string::npos)
          << error;
    }
    // Deregistering what is not a window: that rank says so, and the others
    // that the ranks disagree.
    coilWindow_t win = nullptr;
    ASSERT_EQ(coilCommWindowRegister(comm, memory.get(), kWindowBytes, &win, 0), coilSuccess)
        << coilGetLastError(comm);
    int notAWindow = 0;
    EXPECT_NE(coilCommWindowDeregister(
                  comm, rank == 0 ? reinterpret_cast<coilWindow_t>(&notAWindow) : win),
              coilSuccess);
    EXPECT_NE(std::string(coilGetLastError(comm))
                  .find(rank == 0 ? "not a window of this communicator" : "different windows"),
              std::string::npos)
        << coilGetLastError(comm);
    EXPECT_EQ(coilCommWindowDeregister(comm, win), coilSuccess) << coilGetLastError(comm);
  });
}

// Once `stream` has run, the call enqueued on it failed as misuse, saying
// `says`.
void expectCallFailed(coilComm_t comm, device::Stream stream, const char* says) {
  device::syncStream(stream);
  EXPECT_EQ(asyncErrorOf(comm), coilInvalidUsage);
  EXPECT_NE(std::string(coilGetLastError(comm)).find(says), std::string::npos)
      << coilGetLastError(comm);
}

// Buffers at different places in the windows: every rank's call fails
// before anyone reads, naming it, and no rank's stream is held.
TEST(FakeGpuWindowsRefused, BuffersAtDifferentPlacesFailTheCallOnEveryRank) {
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
  runRanks({2, Launch::Processes, "shm"}, [&](coilComm_t comm, int rank) {
    TwoWindows w;
    registerBoth(comm, w);
    device::Stream stream = device::createStream();
    uint8_t* send = w.inBase() + (rank == 0 ? 0 : 256);
    ASSERT_EQ(coilAllReduce(send, w.outBase(), 1000, coilInt32, coilSum, comm, stream),
              coilSuccess);
    expectCallFailed(comm, stream, "different places");
    device::destroyStream(stream);
    // The call failed, the communicator did not: the windows go as usual.
    EXPECT_EQ(coilCommWindowDeregister(comm, w.in), coilSuccess) << coilGetLastError(comm);
    EXPECT_EQ(coilCommWindowDeregister(comm, w.out), coilSuccess) << coilGetLastError(comm);
  });
}

// Rooted calls on windows whose ranks disagree: on the root (a
// broadcast), or on whether the buffer is in a window at all (a reduce
// whose rank 1 passes a plain buffer takes another path there). Every
// rank's call fails, saying why, and the communicator goes on.
TEST(FakeGpuWindowsRefused, RootedCallsThatDisagreeFailOnEveryRank) {
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
  runRanks({3, Launch::Processes, "shm"}, [&](coilComm_t comm, int rank) {
    TwoWindows w;
    registerBoth(comm, w);
    device::Stream stream = device::createStream();
    constexpr size_t kCount = 1000;
    ASSERT_EQ(coilBroadcast(w.outBase(), w.outBase(), kCount, coilInt32, rank == 2 ? 1 : 0, comm,
                            stream),
              coilSuccess);
    expectCallFailed(comm, stream, "different arguments");
    DeviceBuffer plain(kCount * sizeof(int32_t));
    ASSERT_EQ(coilReduce(rank == 1 ? plain.get() : w.inBase(), w.outBase(), kCount, coilInt32,
                         coilSum, 0, comm, stream),
              coilSuccess);
    expectCallFailed(comm, stream, "different places in their windows");
    // The calls failed, the communicator did not (its asynchronous error
    // stays, as NCCL's): the same reduce with every input in a window.
    std::vector<int32_t> ones(kCount, rank + 1);
    std::memcpy(w.inBase(), ones.data(), kCount * sizeof(int32_t));
    ASSERT_EQ(coilReduce(w.inBase(), w.outBase(), kCount, coilInt32, coilSum, 0, comm, stream),
              coilSuccess);
    device::syncStream(stream);
    for (size_t i = 0; rank == 0 && i < kCount; ++i) {
      int32_t got = 0;
      std::memcpy(&got, w.outBase() + i * sizeof got, sizeof got);
      ASSERT_EQ(got, 6) << "element " << i;
    }
    device::destroyStream(stream);
    EXPECT_EQ(coilCommWindowDeregister(comm, w.in), coilSuccess) << coilGetLastError(comm);
    EXPECT_EQ(coilCommWindowDeregister(comm, w.out), coilSuccess) << coilGetLastError(comm);
  });
}

// A rank whose buffer cannot be exported (memory CUDA's legacy IPC cannot
// share): the window is registered on every rank but mapped on none, and
// calls on it take the other paths, still right.
TEST(FakeGpuWindowsRefused, ABufferThatCannotBeExportedLeavesTheWindowUnmappedEverywhere) {
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "1");
  runRanksRaw({3, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    if (rank == 1) device::fake::refuseIpcRanges("cudaErrorInvalidValue (memory from cuMem)");
    coilComm_t comm = initWithTimeout(id, 3, rank, 30000);
    ASSERT_NE(comm, nullptr);
    TwoWindows w;
    registerBoth(comm, w);
    EXPECT_FALSE(w.in->mapped());
    EXPECT_FALSE(w.out->mapped());
    allReduceEveryCase(comm, rank, 3, w, false);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

}  // namespace
}  // namespace coil::test
