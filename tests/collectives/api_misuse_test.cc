// Misuse of the C API that real programs commit: sizes that overflow,
// handles used after destroy or abort, destroy called twice, enum values
// outside their range. Each must end in coilInvalidArgument and a message
// that names the problem — never a crash, a hang, or a touch of freed memory
// (the sanitizer leg, tools/run-tests --sanitize, runs this file too).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness/run_ranks.h"

namespace coil::test {
namespace {

bool lastErrorHas(coilComm_t comm, const char* needle) {
  return std::string(coilGetLastError(comm)).find(needle) != std::string::npos;
}

// count × nranks × element size overflows size_t for every rank count >= 2;
// the product must be checked before anything is multiplied or moved.
TEST(SizeOverflow, EveryCollectiveRejectsCountsWhoseBytesOverflow) {
  for (int n : {2, 3}) {
    runRanks({n, Launch::Threads, "shm"}, [n](coilComm_t comm, int) {
      char s[64] = {}, r[64] = {};
      const size_t huge = SIZE_MAX / 2 + 1;                         // × 2 ranks overflows
      const size_t perRank = SIZE_MAX / static_cast<size_t>(n) + 1;  // × n overflows
      const size_t asFloats = SIZE_MAX / 4 + 1;                      // × 4 bytes overflows
      auto expectOverflow = [&](coilResult_t rc, const char* call) {
        EXPECT_EQ(rc, coilInvalidArgument) << call;
        EXPECT_TRUE(lastErrorHas(comm, "overflow")) << call << ": " << coilGetLastError(comm);
      };
      for (size_t count : {huge, perRank}) {
        expectOverflow(coilAllGather(s, r, count, coilInt8, comm, nullptr), "coilAllGather");
        expectOverflow(coilReduceScatter(s, r, count, coilInt8, coilSum, comm, nullptr),
                       "coilReduceScatter");
        expectOverflow(coilAlltoAll(s, r, count, coilInt8, comm, nullptr), "coilAlltoAll");
        expectOverflow(coilGather(s, r, count, coilInt8, 0, comm, nullptr), "coilGather");
        expectOverflow(coilScatter(s, r, count, coilInt8, 0, comm, nullptr), "coilScatter");
      }
      expectOverflow(coilAllReduce(s, r, asFloats, coilFloat, coilSum, comm, nullptr),
                     "coilAllReduce");
      expectOverflow(coilBroadcast(s, r, asFloats, coilFloat, 0, comm, nullptr), "coilBroadcast");
      expectOverflow(coilReduce(s, r, asFloats, coilFloat, coilSum, 0, comm, nullptr),
                     "coilReduce");
      expectOverflow(coilSend(s, asFloats, coilFloat, 0, comm, nullptr), "coilSend");
      expectOverflow(coilRecv(r, asFloats, coilFloat, 0, comm, nullptr), "coilRecv");
      // The communicator is still good afterwards.
      float x = 1.0f, y = 0.0f;
      ASSERT_EQ(coilAllReduce(&x, &y, 1, coilFloat, coilSum, comm, nullptr), coilSuccess)
          << coilGetLastError(comm);
      EXPECT_EQ(y, static_cast<float>(n));
    });
  }
}

// Creates a 1-rank communicator (no peers: nothing to wait for).
coilComm_t soloComm() {
  coilUniqueId id;
  EXPECT_EQ(coilGetUniqueId(&id), coilSuccess) << coilGetLastError(nullptr);
  coilComm_t comm = nullptr;
  EXPECT_EQ(coilCommInitRank(&comm, 1, id, 0), coilSuccess) << coilGetLastError(nullptr);
  return comm;
}

// Every entry point that takes a communicator, called on `comm`: each must
// return coilInvalidArgument naming the stale handle.
void expectEveryCallRejects(coilComm_t comm) {
  float a[4] = {}, b[4] = {};
  int v = 0;
  coilResult_t async = coilSuccess;
  coilRedOp_t op;
  float scalar = 2.0f;
  coilComm_t child = nullptr;
  const std::vector<std::pair<const char*, coilResult_t>> calls = {
      {"coilAllReduce", coilAllReduce(a, b, 4, coilFloat, coilSum, comm, nullptr)},
      {"coilBroadcast", coilBroadcast(a, b, 4, coilFloat, 0, comm, nullptr)},
      {"coilReduce", coilReduce(a, b, 4, coilFloat, coilSum, 0, comm, nullptr)},
      {"coilAllGather", coilAllGather(a, b, 1, coilFloat, comm, nullptr)},
      {"coilReduceScatter", coilReduceScatter(a, b, 1, coilFloat, coilSum, comm, nullptr)},
      {"coilAlltoAll", coilAlltoAll(a, b, 1, coilFloat, comm, nullptr)},
      {"coilGather", coilGather(a, b, 1, coilFloat, 0, comm, nullptr)},
      {"coilScatter", coilScatter(a, b, 1, coilFloat, 0, comm, nullptr)},
      {"coilSend", coilSend(a, 4, coilFloat, 0, comm, nullptr)},
      {"coilRecv", coilRecv(b, 4, coilFloat, 0, comm, nullptr)},
      {"coilBarrier", coilBarrier(comm, nullptr)},
      {"coilCommCount", coilCommCount(comm, &v)},
      {"coilCommUserRank", coilCommUserRank(comm, &v)},
      {"coilCommGetAsyncError", coilCommGetAsyncError(comm, &async)},
      {"coilCommFinalize", coilCommFinalize(comm)},
      {"coilCommSplit", coilCommSplit(comm, 0, 0, &child, nullptr)},
      {"coilRedOpCreatePreMulSum",
       coilRedOpCreatePreMulSum(&op, &scalar, coilFloat, coilScalarHostImmediate, comm)},
      {"coilRedOpDestroy", coilRedOpDestroy(coilAvg, comm)},
      {"coilCommRevoke", coilCommRevoke(comm)},
      {"coilCommAbort", coilCommAbort(comm)},
      {"coilCommDestroy", coilCommDestroy(comm)},
  };
  for (const auto& [name, rc] : calls) {
    EXPECT_EQ(rc, coilInvalidArgument) << name;
  }
  // The message of the last call, on this thread and through the stale handle.
  EXPECT_TRUE(lastErrorHas(nullptr, "destroyed")) << coilGetLastError(nullptr);
  EXPECT_TRUE(lastErrorHas(comm, "destroyed")) << coilGetLastError(comm);
  EXPECT_EQ(child, nullptr);
}

TEST(StaleHandle, EveryCallAfterDestroyIsRejected) {
  coilComm_t comm = soloComm();
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(coilCommDestroy(comm), coilSuccess);
  expectEveryCallRejects(comm);
}

TEST(StaleHandle, EveryCallAfterAbortIsRejected) {
  coilComm_t comm = soloComm();
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(coilCommAbort(comm), coilSuccess);
  expectEveryCallRejects(comm);
}

// enter() remembers the handle a thread last found live: a call just
// before the destroy, on this thread or another, must not let a later one in.
TEST(StaleHandle, AHandleUsedJustBeforeDestroyIsRejectedAfter) {
  coilComm_t comm = soloComm();
  ASSERT_NE(comm, nullptr);
  float x = 1, y = 0;
  ASSERT_EQ(coilAllReduce(&x, &y, 1, coilFloat, coilSum, comm, nullptr), coilSuccess);
  ASSERT_EQ(coilCommDestroy(comm), coilSuccess);
  expectEveryCallRejects(comm);
}

TEST(StaleHandle, AHandleThisThreadUsedIsRejectedAfterAnotherThreadDestroysIt) {
  coilComm_t comm = soloComm();
  ASSERT_NE(comm, nullptr);
  float x = 1, y = 0;
  ASSERT_EQ(coilAllReduce(&x, &y, 1, coilFloat, coilSum, comm, nullptr), coilSuccess);
  coilResult_t destroyed = coilInternalError;
  std::thread([&] { destroyed = coilCommDestroy(comm); }).join();
  ASSERT_EQ(destroyed, coilSuccess);
  EXPECT_EQ(coilAllReduce(&x, &y, 1, coilFloat, coilSum, comm, nullptr), coilInvalidArgument);
  EXPECT_TRUE(lastErrorHas(nullptr, "destroyed")) << coilGetLastError(nullptr);
}

TEST(StaleHandle, DoubleDestroyIsAnErrorNotACrash) {
  coilComm_t comm = soloComm();
  ASSERT_EQ(coilCommDestroy(comm), coilSuccess);
  EXPECT_EQ(coilCommDestroy(comm), coilInvalidArgument);
  EXPECT_TRUE(lastErrorHas(nullptr, "destroyed")) << coilGetLastError(nullptr);
  // NULL stays the documented no-op.
  EXPECT_EQ(coilCommDestroy(nullptr), coilSuccess);
}

// A handle that coil never made (garbage, or a pointer to something else).
TEST(StaleHandle, APointerThatIsNoCommunicatorIsRejected) {
  alignas(64) char notAComm[512];
  std::memset(notAComm, 0x5A, sizeof notAComm);
  auto bogus = reinterpret_cast<coilComm_t>(notAComm);
  int n = 0;
  EXPECT_EQ(coilCommCount(bogus, &n), coilInvalidArgument);
  EXPECT_EQ(coilCommDestroy(bogus), coilInvalidArgument);
  EXPECT_TRUE(lastErrorHas(nullptr, "not a live communicator")) << coilGetLastError(nullptr);
}

// Many communicators created and destroyed: a stale handle must not come to
// name a new communicator that happens to reuse its memory.
TEST(StaleHandle, ANewCommunicatorDoesNotReviveAnOldHandle) {
  coilComm_t first = soloComm();
  ASSERT_EQ(coilCommDestroy(first), coilSuccess);
  std::vector<coilComm_t> live;
  for (int i = 0; i < 64; ++i) live.push_back(soloComm());
  int n = 0;
  EXPECT_EQ(coilCommCount(first, &n), coilInvalidArgument);
  for (coilComm_t c : live) {
    EXPECT_NE(c, first);
    EXPECT_EQ(coilCommDestroy(c), coilSuccess);
  }
}

// One thread destroys while others keep calling: each call either completes
// or is rejected, and destroy returns once the calls inside have left.
TEST(StaleHandle, DestroyWhileOtherThreadsCallIsSafe) {
  for (int trial = 0; trial < 20; ++trial) {
    coilComm_t comm = soloComm();
    std::atomic<bool> go{false};
    std::vector<std::thread> callers;
    std::atomic<int> unexpected{0};
    for (int t = 0; t < 3; ++t)
      callers.emplace_back([&] {
        while (!go.load()) std::this_thread::yield();
        int n = 0;
        coilResult_t async = coilSuccess;
        for (int i = 0; i < 200; ++i) {
          coilResult_t rc = i % 2 ? coilCommCount(comm, &n) : coilCommGetAsyncError(comm, &async);
          if (rc != coilSuccess && rc != coilInvalidArgument) ++unexpected;
        }
      });
    go = true;
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    for (auto& t : callers) t.join();
    EXPECT_EQ(unexpected.load(), 0);
  }
}

// The datatype and op arrive from C as plain ints; values outside the enums
// are validated as integers (UBSan's enum check flags a load of them as the
// enum type).
TEST(EnumRange, OutOfRangeTypesAndOpsAreRejectedByValue) {
  coilComm_t comm = soloComm();
  float a[2] = {1, 2}, b[2] = {};
  for (int type : {-1, 10, 99, 1 << 20, INT32_MIN}) {
    coilDataType_t t;
    std::memcpy(&t, &type, sizeof t);  // what a C caller's int is, bit for bit
    EXPECT_EQ(coilAllReduce(a, b, 2, t, coilSum, comm, nullptr), coilInvalidArgument);
    EXPECT_TRUE(lastErrorHas(comm, "invalid datatype")) << coilGetLastError(comm);
    EXPECT_EQ(coilSend(a, 2, t, 0, comm, nullptr), coilInvalidArgument);
  }
  for (int value : {-1, 8, 77, 1 << 24, INT32_MAX}) {
    coilRedOp_t op;
    std::memcpy(&op, &value, sizeof op);
    EXPECT_EQ(coilAllReduce(a, b, 2, coilFloat, op, comm, nullptr), coilInvalidArgument);
    EXPECT_TRUE(lastErrorHas(comm, "invalid reduction op")) << coilGetLastError(comm);
  }
  ASSERT_EQ(coilCommDestroy(comm), coilSuccess);
}

// coilBand/coilBor/coilBxor take integer types only: with a float type every
// reducing call refuses them by name, inside a group too, and an integer
// call right after works.
TEST(EnumRange, BitwiseOpsOnFloatTypesAreRefusedByName) {
  coilComm_t comm = soloComm();
  double a[2] = {1, 2}, b[2] = {};
  const char* want = "reduction op bxor takes integer datatypes only, not float64";
  EXPECT_EQ(coilAllReduce(a, b, 2, coilFloat64, coilBxor, comm, nullptr), coilInvalidArgument);
  EXPECT_TRUE(lastErrorHas(comm, want)) << coilGetLastError(comm);
  EXPECT_EQ(coilReduce(a, b, 2, coilFloat64, coilBxor, 0, comm, nullptr), coilInvalidArgument);
  EXPECT_TRUE(lastErrorHas(comm, want)) << coilGetLastError(comm);
  EXPECT_EQ(coilReduceScatter(a, b, 2, coilFloat64, coilBxor, comm, nullptr), coilInvalidArgument);
  EXPECT_TRUE(lastErrorHas(comm, want)) << coilGetLastError(comm);
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  EXPECT_EQ(coilAllReduce(a, b, 2, coilFloat16, coilBand, comm, nullptr), coilInvalidArgument);
  EXPECT_TRUE(lastErrorHas(comm, "reduction op band takes integer datatypes only, not float16"))
      << coilGetLastError(comm);
  coilGroupEnd();  // the group's result is not this test's subject
  int64_t x[2] = {0b1100, 0b1010}, y[2] = {};
  ASSERT_EQ(coilAllReduce(x, y, 2, coilInt64, coilBxor, comm, nullptr), coilSuccess)
      << coilGetLastError(comm);
  EXPECT_EQ(y[0], 0b1100);  // one rank: the input itself
  EXPECT_EQ(y[1], 0b1010);
  ASSERT_EQ(coilCommDestroy(comm), coilSuccess);
}

}  // namespace
}  // namespace coil::test

namespace coil::test {
namespace {

// coilCommRegister / coilCommDeregister: bad handles are errors naming the
// problem; a transport without a zero-copy path (shm, tcp) accepts the
// registration and changes nothing (results stay exact).
TEST(Registration, BadHandlesAreNamedAndUnusedRegistrationsAreHarmless) {
  for (const std::string& transport : testedTransports()) {
    SCOPED_TRACE(transport);
    runRanks({2, Launch::Threads, transport}, [](coilComm_t comm, int rank) {
      std::vector<float> buf(300001, static_cast<float>(rank + 1));
      EXPECT_EQ(coilCommRegister(comm, buf.data(), buf.size() * sizeof(float), nullptr),
                coilInvalidArgument);
      EXPECT_NE(std::string(coilGetLastError(comm)).find("handle"), std::string::npos);
      void* handle = nullptr;
      ASSERT_EQ(coilCommRegister(comm, buf.data(), buf.size() * sizeof(float), &handle),
                coilSuccess)
          << coilGetLastError(comm);
      EXPECT_NE(handle, nullptr);
      const int peer = 1 - rank;
      std::vector<float> in(buf.size());
      ASSERT_EQ(coilGroupStart(), coilSuccess);
      EXPECT_EQ(coilSend(buf.data(), buf.size(), coilFloat, peer, comm, nullptr), coilSuccess);
      EXPECT_EQ(coilRecv(in.data(), in.size(), coilFloat, peer, comm, nullptr), coilSuccess);
      ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(comm);
      EXPECT_EQ(in[0], static_cast<float>(peer + 1));
      EXPECT_EQ(in.back(), static_cast<float>(peer + 1));
      EXPECT_EQ(coilCommDeregister(comm, handle), coilSuccess) << coilGetLastError(comm);
      EXPECT_EQ(coilCommDeregister(comm, handle), coilInvalidArgument);
      EXPECT_NE(std::string(coilGetLastError(comm)).find("not a registration"), std::string::npos)
          << coilGetLastError(comm);
      int notAHandle = 0;
      EXPECT_EQ(coilCommDeregister(comm, &notAHandle), coilInvalidArgument);
    });
  }
  EXPECT_EQ(coilCommRegister(nullptr, nullptr, 0, nullptr), coilInvalidArgument);
}

// coilCommWindowRegister / coilCommWindowDeregister on host memory (a
// window is device memory): every rank fails at once, saying so, and the
// communicator goes on. tests/device/fake_gpu_windows_test covers windows
// themselves.
TEST(Windows, HostMemoryIsRefusedOnEveryRankWithoutAHang) {
  for (const std::string& transport : testedTransports()) {
    SCOPED_TRACE(transport);
    runRanks({3, Launch::Threads, transport}, [](coilComm_t comm, int) {
      std::vector<float> buf(1024, 1.0f);
      coilWindow_t win = nullptr;
      EXPECT_EQ(coilCommWindowRegister(comm, buf.data(), buf.size() * sizeof(float), &win,
                                       COIL_WIN_COLL_SYMMETRIC),
                coilInvalidArgument);
      EXPECT_EQ(win, nullptr);
      EXPECT_NE(std::string(coilGetLastError(comm)).find("device"), std::string::npos)
          << coilGetLastError(comm);
      // NULL is no window, on every rank: each says so.
      EXPECT_NE(coilCommWindowDeregister(comm, nullptr), coilSuccess);
      EXPECT_NE(std::string(coilGetLastError(comm)).find("not a window"), std::string::npos)
          << coilGetLastError(comm);
      float sum = 0;
      const float one = 1;
      ASSERT_EQ(coilAllReduce(&one, &sum, 1, coilFloat32, coilSum, comm, nullptr), coilSuccess)
          << coilGetLastError(comm);
      EXPECT_EQ(sum, 3.0f);
    });
  }
  coilWindow_t win = nullptr;
  EXPECT_EQ(coilCommWindowRegister(nullptr, nullptr, 0, &win, 0), coilInvalidArgument);
  EXPECT_EQ(coilCommWindowDeregister(nullptr, nullptr), coilInvalidArgument);
}

}  // namespace
}  // namespace coil::test

namespace coil::test {
namespace {

// Streams and device memory where no CUDA device is usable (this suite's
// machines; the gpu suite covers a real device): a stream with host
// buffers is refused by name, the device calls say why they cannot run,
// and the communicator has no device.
TEST(DeviceArguments, HostBuffersWithAStreamAndDeviceCallsWithoutADevice) {
  coilComm_t comm = soloComm();
  ASSERT_NE(comm, nullptr);
  std::vector<float> a(8, 1.0f), b(8);
  auto stream = reinterpret_cast<coilStream_t>(uintptr_t{0x1000});
  for (coilResult_t rc :
       {coilAllReduce(a.data(), b.data(), 8, coilFloat32, coilSum, comm, stream),
        coilBroadcast(a.data(), b.data(), 8, coilFloat32, 0, comm, stream),
        coilAllGather(a.data(), b.data(), 8, coilFloat32, comm, stream)}) {
    EXPECT_EQ(rc, coilInvalidArgument);
    EXPECT_TRUE(lastErrorHas(comm, "stream must be NULL for host buffers")) << coilGetLastError(comm);
  }
  // The refused calls left nothing behind: a host call still works.
  EXPECT_EQ(coilAllReduce(a.data(), b.data(), 8, coilFloat32, coilSum, comm, nullptr), coilSuccess);
  EXPECT_EQ(b[7], 1.0f);
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(coilMemAlloc(&p, 1024), coilInvalidUsage);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(lastErrorHas(nullptr, "CUDA")) << coilGetLastError(nullptr);
  // In words a user can act on: with no NVIDIA driver at all, the runtime's
  // own "CUDA driver version is insufficient" would send users to update one.
  if (!lastErrorHas(nullptr, "built without CUDA")) {
    if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY)) {
      dlclose(driver);
    } else {
      EXPECT_TRUE(lastErrorHas(nullptr, "no NVIDIA driver on this machine")) << coilGetLastError(nullptr);
    }
  }
  EXPECT_EQ(coilMemFree(nullptr), coilSuccess);
  EXPECT_EQ(coilMemFree(a.data()), coilInvalidArgument);  // host memory is not coilMemAlloc's
  int device = 7;
  EXPECT_EQ(coilCommCuDevice(comm, &device), coilSuccess);
  EXPECT_EQ(device, -1);
  EXPECT_EQ(coilCommCuDevice(comm, nullptr), coilInvalidArgument);
  // A barrier on a stream needs a device too.
  EXPECT_EQ(coilBarrier(comm, stream), coilInvalidUsage);
  EXPECT_TRUE(lastErrorHas(comm, "needs a CUDA device")) << coilGetLastError(comm);
  EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
}

// Several ranks on one device are allowed: a devlist with repeats is no
// longer refused (it only names devices where there are some).
TEST(DeviceArguments, InitAllTakesADevlistWithRepeats) {
  std::vector<coilComm_t> comms(3);
  const int devlist[3] = {0, 0, 0};
  ASSERT_EQ(coilCommInitAll(comms.data(), 3, devlist), coilSuccess) << coilGetLastError(nullptr);
  for (coilComm_t c : comms) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
  const int negative[2] = {0, -1};
  EXPECT_EQ(coilCommInitAll(comms.data(), 2, negative), coilInvalidArgument);
  EXPECT_TRUE(lastErrorHas(nullptr, "devlist[1] is negative")) << coilGetLastError(nullptr);
}

}  // namespace
}  // namespace coil::test
