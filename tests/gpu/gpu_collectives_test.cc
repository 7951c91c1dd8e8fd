// The gpu suite: every collective on device buffers, enqueued on streams,
// against the independent reference, with 1 to 4 ranks on one GPU, as
// forked processes (--gtest_filter=Procs/*) and as threads of one process
// made by coilCommInitAll (Threads/*; ranks that share a device in one
// process call in host order, staged_stream.h). Also: what a stream
// promises (the call returns before the data moves; results are there
// after a stream sync; two communicators on two streams do not wait for
// each other), argument checks, and a killed rank.
//
// Exits 77 with the reason where no CUDA device is usable. The probe runs
// in a child process: a parent that initialised CUDA could not fork ranks
// that use it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "device/cuda_diagnosis.h"
#include "harness/reference.h"
#include "harness/run_ranks.h"

namespace coil::test {
namespace {

#define CUDA_OK(call)                                                               \
  do {                                                                              \
    const cudaError_t err_ = (call);                                                \
    ASSERT_EQ(err_, cudaSuccess) << #call << ": " << cudaGetErrorString(err_);      \
  } while (0)

void expectOk(coilResult_t rc, coilComm_t comm) {
  ASSERT_EQ(rc, coilSuccess) << coilGetErrorString(rc) << ": " << coilGetLastError(comm);
}

// Device memory for the buffers of one rank, taken once. In one process,
// cudaMalloc and cudaFree synchronise the whole device; one of them while
// another rank's call waits for this rank's next call would wait forever
// (so it is with NCCL too). So ranks that are threads take their buffers
// from a pool made before any of them starts.
class Pool {
 public:
  explicit Pool(size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(coilMemAlloc(reinterpret_cast<void**>(&base_), bytes), coilSuccess)
        << coilGetLastError(nullptr);
  }
  ~Pool() { coilMemFree(base_); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  uint8_t* take(size_t bytes) {
    const size_t at = used_;
    used_ += (bytes + 255) / 256 * 256 + 256;
    EXPECT_LE(used_, bytes_) << "the test's device pool is too small";
    ++live_;
    return used_ <= bytes_ ? base_ + at : nullptr;
  }
  void give() {
    if (--live_ == 0) used_ = 0;  // every buffer of the step is gone
  }

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_, used_ = 0;
  int live_ = 0;
};

constexpr size_t kPoolBytes = size_t{64} << 20;
thread_local Pool* tPool = nullptr;

// A device buffer holding `host`, from this thread's pool where it has one.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (tPool) {
      ptr_ = tPool->take(bytes);
    } else {
      EXPECT_EQ(coilMemAlloc(&ptr_, bytes > 0 ? bytes : 1), coilSuccess) << coilGetLastError(nullptr);
    }
  }
  DeviceBuffer(const std::vector<uint8_t>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (tPool) tPool->give();
    else coilMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // On `stream`, the legacy one by default. While a stream of this process
  // waits (a gate, a call for a peer), pass another: the legacy stream can
  // share the waiting stream's hardware queue and wait behind it (an H100
  // did so, 2026-11-26, with 32 queues and three streams).
  void upload(const std::vector<uint8_t>& host, cudaStream_t stream = cudaStreamLegacy) {
    if (!host.empty()) {
      // A pageable copy returns before its DMA lands; the stream's sync
      // waits for it.
      EXPECT_EQ(cudaMemcpyAsync(ptr_, host.data(), host.size(), cudaMemcpyHostToDevice, stream), cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    }
  }
  std::vector<uint8_t> download(cudaStream_t stream = cudaStreamLegacy) const {
    std::vector<uint8_t> host(bytes_);
    if (bytes_) {
      EXPECT_EQ(cudaMemcpyAsync(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost, stream), cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    }
    return host;
  }
  uint8_t* get() const { return static_cast<uint8_t*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

// Holds streams back until open(): each held stream waits on a word of
// pinned host memory (cuStreamWaitValue32), so nothing on the host blocks
// (a host function that blocks would hold CUDA's own worker thread).
class Gate {
 public:
  Gate() {
    void* p = nullptr;
    EXPECT_EQ(cudaHostAlloc(&p, 64, cudaHostAllocMapped), cudaSuccess);
    word_ = static_cast<volatile uint32_t*>(p);
    *word_ = 0;
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 11070, cudaEnableDefault, &found),
              cudaSuccess);
    wait_ = reinterpret_cast<WaitValue32>(fn);
  }
  ~Gate() { cudaFreeHost(const_cast<uint32_t*>(word_)); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  void hold(cudaStream_t stream) const {
    void* device = nullptr;
    ASSERT_EQ(cudaHostGetDevicePointer(&device, const_cast<uint32_t*>(word_), 0), cudaSuccess);
    ASSERT_NE(wait_, nullptr);
    ASSERT_EQ(wait_(stream, reinterpret_cast<uintptr_t>(device), 1, 0 /* GEQ */), 0);
  }
  void open() const { __atomic_store_n(word_, 1u, __ATOMIC_RELEASE); }

 private:
  using WaitValue32 = int (*)(cudaStream_t, uintptr_t, uint32_t, unsigned);
  volatile uint32_t* word_ = nullptr;
  WaitValue32 wait_ = nullptr;
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
  void sync() const { EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess); }
};

const size_t kCounts[] = {0, 1, 7, 1009, 70001};

// int32 value of (rank, i), exact in every type's use here.
int32_t tagValue(int rank, size_t i) { return static_cast<int32_t>(rank * 100003 + i % 99991); }

std::vector<uint8_t> tagged(int rank, size_t count, size_t firstIndex = 0) {
  std::vector<uint8_t> v(count * 4);
  for (size_t i = 0; i < count; ++i) {
    const int32_t x = tagValue(rank, firstIndex + i);
    std::memcpy(v.data() + 4 * i, &x, 4);
  }
  return v;
}

int32_t at(const std::vector<uint8_t>& v, size_t i) {
  int32_t x;
  std::memcpy(&x, v.data() + 4 * i, 4);
  return x;
}

// ---- the bodies: one rank's view, whichever way the ranks were made -----

void allReduceBody(coilComm_t comm, int rank, int n) {
  Stream stream;
  for (coilDataType_t t : {coilFloat32, coilFloat16, coilBfloat16, coilFloat64, coilInt64, coilUint8})
    for (coilRedOp_t op : {coilSum, coilProd, coilMax, coilMin, coilAvg, coilBand, coilBor, coilBxor})
      for (size_t count : kCounts)
        for (bool inPlace : {false, true}) {
          if (!opTakesType(op, t)) continue;  // bitwise ops take integer types only
          SCOPED_TRACE(::testing::Message() << nameOf(t) << " " << nameOf(op) << " count " << count
                                            << (inPlace ? " in place" : ""));
          const auto in = makeInput(t, op, rank, n, count);
          const auto want = makeExpected(t, op, n, count);
          DeviceBuffer send(in), recv(in.size());
          uint8_t* dst = inPlace ? send.get() : recv.get();
          expectOk(coilAllReduce(send.get(), dst, count, t, op, comm, stream.s), comm);
          stream.sync();
          const auto got = inPlace ? send.download() : recv.download();
          ASSERT_EQ(firstMismatch(t, got.data(), want.data(), count), SIZE_MAX);
        }
}

// Calls on windows (coilCommWindowRegister): all-reduces of every type and
// op, all-gathers and broadcasts (the outputs in a window), reduce-scatters,
// reduces and all-to-alls (the inputs), in place and out, at every count. Where CUDA IPC maps the
// ranks' buffers (every rank a GPU of this host), calls of
// COIL_PEER_MIN_BYTES and more read the peers' buffers in place
// (algorithms/registered_collectives.h); the suite runs with the default
// minimum and with 1 byte (the peer-window runs' environment).
void windowCollectivesBody(coilComm_t comm, int rank, int n) {
  constexpr size_t kWindowBytes = size_t{2} << 20;
  DeviceBuffer memory(2 * kWindowBytes + 256);  // two windows in one allocation
  uint8_t* inBase = memory.get() + 256;
  uint8_t* outBase = inBase + kWindowBytes;
  coilWindow_t in = nullptr, out = nullptr;
  expectOk(coilCommWindowRegister(comm, inBase, kWindowBytes, &in, COIL_WIN_COLL_SYMMETRIC), comm);
  expectOk(coilCommWindowRegister(comm, outBase, kWindowBytes, &out, COIL_WIN_DEFAULT), comm);
  Stream stream;
  for (coilDataType_t t : {coilFloat32, coilFloat16, coilBfloat16, coilFloat64, coilInt64, coilUint8})
    for (coilRedOp_t op : {coilSum, coilProd, coilMax, coilMin, coilAvg, coilBand, coilBor, coilBxor})
      for (size_t count : kCounts)
        for (bool inPlace : {false, true}) {
          if (!opTakesType(op, t)) continue;  // bitwise ops take integer types only
          SCOPED_TRACE(::testing::Message() << "window " << nameOf(t) << " " << nameOf(op)
                                            << " count " << count << (inPlace ? " in place" : ""));
          const auto input = makeInput(t, op, rank, n, count);
          const auto want = makeExpected(t, op, n, count);
          uint8_t* dst = inPlace ? inBase : outBase;
          CUDA_OK(cudaMemcpyAsync(inBase, input.data(), input.size(), cudaMemcpyHostToDevice,
                                  stream.s));
          expectOk(coilAllReduce(inBase, dst, count, t, op, comm, stream.s), comm);
          std::vector<uint8_t> got(input.size());
          CUDA_OK(cudaMemcpyAsync(got.data(), dst, got.size(), cudaMemcpyDeviceToHost, stream.s));
          stream.sync();
          ASSERT_EQ(firstMismatch(t, got.data(), want.data(), count), SIZE_MAX);
        }
  for (size_t count : kCounts)
    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "window count " << count << (inPlace ? " in place" : ""));
      const size_t bytes = count * 4;
      {  // all-gather into the output window; in place: my block of it is the input
        DeviceBuffer plain(tagged(rank, count));
        const auto mine = tagged(rank, count);
        if (inPlace)
          CUDA_OK(cudaMemcpyAsync(outBase + rank * bytes, mine.data(), bytes,
                                  cudaMemcpyHostToDevice, stream.s));
        const uint8_t* input = inPlace ? outBase + rank * bytes : plain.get();
        expectOk(coilAllGather(input, outBase, count, coilInt32, comm, stream.s), comm);
        std::vector<uint8_t> got(bytes * n);
        CUDA_OK(cudaMemcpyAsync(got.data(), outBase, got.size(), cudaMemcpyDeviceToHost, stream.s));
        stream.sync();
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(at(got, r * count + i), tagValue(r, i));
      }
      {  // reduce-scatter (max) from the input window; in place: the output is my block
        std::vector<uint8_t> in(bytes * n);
        for (int b = 0; b < n; ++b) {
          const auto block = tagged(rank, count, b * count);
          std::copy(block.begin(), block.end(), in.begin() + static_cast<ptrdiff_t>(b * bytes));
        }
        CUDA_OK(cudaMemcpyAsync(inBase, in.data(), in.size(), cudaMemcpyHostToDevice, stream.s));
        DeviceBuffer plain(bytes);
        uint8_t* out = inPlace ? inBase + rank * bytes : plain.get();
        expectOk(coilReduceScatter(inBase, out, count, coilInt32, coilMax, comm, stream.s), comm);
        std::vector<uint8_t> got(bytes);
        CUDA_OK(cudaMemcpyAsync(got.data(), out, bytes, cudaMemcpyDeviceToHost, stream.s));
        stream.sync();
        for (size_t i = 0; i < count; ++i)  // the largest rank's value wins
          ASSERT_EQ(at(got, i), tagValue(n - 1, rank * count + i));
      }
      for (int root : {0, n - 1}) {
        SCOPED_TRACE(::testing::Message() << "root " << root);
        {  // broadcast into the output window; in place at the root; no input elsewhere
          DeviceBuffer plain(tagged(root, count));
          if (inPlace && rank == root)
            CUDA_OK(cudaMemcpyAsync(outBase, plain.get(), bytes, cudaMemcpyDeviceToDevice,
                                    stream.s));
          const uint8_t* input = rank != root ? nullptr : inPlace ? outBase : plain.get();
          expectOk(coilBroadcast(input, outBase, count, coilInt32, root, comm, stream.s), comm);
          std::vector<uint8_t> got(bytes);
          CUDA_OK(cudaMemcpyAsync(got.data(), outBase, bytes, cudaMemcpyDeviceToHost, stream.s));
          stream.sync();
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(at(got, i), tagValue(root, i)) << i;
        }
        {  // reduce (max) from the input window; in place at the root; no output elsewhere
          const auto mine = tagged(rank, count);
          CUDA_OK(cudaMemcpyAsync(inBase, mine.data(), bytes, cudaMemcpyHostToDevice, stream.s));
          DeviceBuffer plain(bytes);
          uint8_t* out = rank != root ? nullptr : inPlace ? inBase : plain.get();
          expectOk(coilReduce(inBase, out, count, coilInt32, coilMax, root, comm, stream.s), comm);
          std::vector<uint8_t> got(rank == root ? bytes : 0);
          if (rank == root)
            CUDA_OK(cudaMemcpyAsync(got.data(), out, bytes, cudaMemcpyDeviceToHost, stream.s));
          stream.sync();
          for (size_t i = 0; rank == root && i < count; ++i)
            ASSERT_EQ(at(got, i), tagValue(n - 1, i)) << i;
        }
      }
      if (!inPlace) {  // all-to-all from the input window (never in place)
        std::vector<uint8_t> in(bytes * n);
        for (int b = 0; b < n; ++b) {
          const auto block = tagged(rank, count, b * count);
          std::copy(block.begin(), block.end(), in.begin() + static_cast<ptrdiff_t>(b * bytes));
        }
        CUDA_OK(cudaMemcpyAsync(inBase, in.data(), in.size(), cudaMemcpyHostToDevice, stream.s));
        expectOk(coilAlltoAll(inBase, outBase, count, coilInt32, comm, stream.s), comm);
        std::vector<uint8_t> got(bytes * n);
        CUDA_OK(cudaMemcpyAsync(got.data(), outBase, got.size(), cudaMemcpyDeviceToHost, stream.s));
        stream.sync();
        for (int q = 0; q < n; ++q)  // block q: rank q's block for me
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(at(got, q * count + i), tagValue(q, rank * count + i));
      }
    }
  coilResult_t async = coilSuccess;
  expectOk(coilCommGetAsyncError(comm, &async), comm);
  EXPECT_EQ(async, coilSuccess) << coilGetLastError(comm);
  expectOk(coilCommWindowDeregister(comm, in), comm);
  expectOk(coilCommWindowDeregister(comm, out), comm);
}

void rootedBody(coilComm_t comm, int rank, int n) {
  Stream stream;
  for (int root = 0; root < n; ++root)
    for (size_t count : kCounts) {
      SCOPED_TRACE(::testing::Message() << "root " << root << " count " << count);
      {  // broadcast, out of place
        DeviceBuffer send(tagged(rank, count)), recv(count * 4);
        expectOk(coilBroadcast(send.get(), recv.get(), count, coilInt32, root, comm, stream.s), comm);
        stream.sync();
        const auto got = recv.download();
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(at(got, i), tagValue(root, i)) << i;
      }
      {  // reduce (sum), in place at the root
        const auto in = makeInput(coilFloat32, coilSum, rank, n, count);
        const auto want = makeExpected(coilFloat32, coilSum, n, count);
        DeviceBuffer buf(in);
        expectOk(coilReduce(buf.get(), buf.get(), count, coilFloat32, coilSum, root, comm, stream.s), comm);
        stream.sync();
        if (rank == root) {
          ASSERT_EQ(firstMismatch(coilFloat32, buf.download().data(), want.data(), count), SIZE_MAX);
        }
      }
      {  // gather into the root, then scatter back out
        DeviceBuffer send(tagged(rank, count)), all(count * 4 * n), back(count * 4);
        expectOk(coilGather(send.get(), all.get(), count, coilInt32, root, comm, stream.s), comm);
        expectOk(coilScatter(all.get(), back.get(), count, coilInt32, root, comm, stream.s), comm);
        stream.sync();
        if (rank == root) {
          const auto got = all.download();
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i) ASSERT_EQ(at(got, r * count + i), tagValue(r, i));
        }
        const auto mine = back.download();
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(at(mine, i), tagValue(rank, i));
      }
    }
}

void gatherScatterFamilyBody(coilComm_t comm, int rank, int n) {
  Stream stream;
  for (size_t count : kCounts)
    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << (inPlace ? " in place" : ""));
      {  // all-gather; in place: this rank's block of recvbuff is the input
        DeviceBuffer recv(count * 4 * n), send(tagged(rank, count));
        if (inPlace) {
          std::vector<uint8_t> seed(count * 4 * n, 0xEE);
          const auto mine = tagged(rank, count);
          std::copy(mine.begin(), mine.end(), seed.begin() + static_cast<ptrdiff_t>(rank * count * 4));
          recv.upload(seed);
        }
        const uint8_t* input = inPlace ? recv.get() + rank * count * 4 : send.get();
        expectOk(coilAllGather(input, recv.get(), count, coilInt32, comm, stream.s), comm);
        stream.sync();
        const auto got = recv.download();
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(at(got, r * count + i), tagValue(r, i));
      }
      {  // reduce-scatter (max); in place: the output is this rank's block
        std::vector<uint8_t> in(count * 4 * n);
        for (int b = 0; b < n; ++b) {
          const auto block = tagged(rank, count, b * count);
          std::copy(block.begin(), block.end(), in.begin() + static_cast<ptrdiff_t>(b * count * 4));
        }
        DeviceBuffer send(in), recv(count * 4);
        uint8_t* out = inPlace ? send.get() + rank * count * 4 : recv.get();
        expectOk(coilReduceScatter(send.get(), out, count, coilInt32, coilMax, comm, stream.s), comm);
        stream.sync();
        const auto got = inPlace ? send.download() : recv.download();
        const size_t base = inPlace ? rank * count : 0;
        for (size_t i = 0; i < count; ++i)  // the largest rank's value wins
          ASSERT_EQ(at(got, base + i), tagValue(n - 1, rank * count + i));
      }
      if (!inPlace) {  // all-to-all: block r of rank s goes to block s of rank r
        std::vector<uint8_t> in(count * 4 * n);
        for (int b = 0; b < n; ++b) {
          const auto block = tagged(rank, count, b * count);
          std::copy(block.begin(), block.end(), in.begin() + static_cast<ptrdiff_t>(b * count * 4));
        }
        DeviceBuffer send(in), recv(count * 4 * n);
        expectOk(coilAlltoAll(send.get(), recv.get(), count, coilInt32, comm, stream.s), comm);
        stream.sync();
        const auto got = recv.download();
        for (int s = 0; s < n; ++s)
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(at(got, s * count + i), tagValue(s, rank * count + i));
      }
    }
}

// A ring exchange in a group, both directions, isend before irecv order.
void sendRecvBody(coilComm_t comm, int rank, int n) {
  Stream stream;
  for (size_t count : kCounts) {
    SCOPED_TRACE(::testing::Message() << "count " << count);
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    DeviceBuffer toNext(tagged(rank, count)), toPrev(tagged(rank + 7, count));
    DeviceBuffer fromPrev(count * 4), fromNext(count * 4);
    expectOk(coilGroupStart(), comm);
    expectOk(coilSend(toNext.get(), count, coilInt32, next, comm, stream.s), comm);
    expectOk(coilSend(toPrev.get(), count, coilInt32, prev, comm, stream.s), comm);
    expectOk(coilRecv(fromPrev.get(), count, coilInt32, prev, comm, stream.s), comm);
    expectOk(coilRecv(fromNext.get(), count, coilInt32, next, comm, stream.s), comm);
    expectOk(coilGroupEnd(), comm);
    stream.sync();
    const auto a = fromPrev.download(), b = fromNext.download();
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(at(a, i), tagValue(prev, i));
      ASSERT_EQ(at(b, i), tagValue(next + 7, i));
    }
  }
}

// One group on three paths: a small all-reduce and a small message (staged:
// below COIL_PEER_MIN_BYTES, 256 KiB by default) and a message of 512 KiB
// (the peer windows, where the ranks have them). Each staged job must find
// its own buffers staged: on the fake GPU the small message's were not, and
// the group crashed (fake_gpu_comm_test's AStagedCallAndMessagesOnBothPaths).
void mixedPathsGroupBody(coilComm_t comm, int rank, int n) {
  Stream stream;
  const size_t small = 7, large = size_t{1} << 17;
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  DeviceBuffer sum(makeInput(coilInt32, coilSum, rank, n, small)), bigOut(tagged(rank, large)),
      smallOut(tagged(rank + 7, small)), bigIn(large * 4), smallIn(small * 4);
  expectOk(coilGroupStart(), comm);
  expectOk(coilAllReduce(sum.get(), sum.get(), small, coilInt32, coilSum, comm, stream.s), comm);
  expectOk(coilSend(bigOut.get(), large, coilInt32, next, comm, stream.s), comm);
  expectOk(coilSend(smallOut.get(), small, coilInt32, next, comm, stream.s), comm);
  expectOk(coilRecv(bigIn.get(), large, coilInt32, prev, comm, stream.s), comm);
  expectOk(coilRecv(smallIn.get(), small, coilInt32, prev, comm, stream.s), comm);
  expectOk(coilGroupEnd(), comm);
  stream.sync();
  const auto want = makeExpected(coilInt32, coilSum, n, small);
  const auto gotSum = sum.download(), gotBig = bigIn.download(), gotSmall = smallIn.download();
  ASSERT_EQ(firstMismatch(coilInt32, gotSum.data(), want.data(), small), SIZE_MAX);
  for (size_t i = 0; i < large; ++i) ASSERT_EQ(at(gotBig, i), tagValue(prev, i)) << i;
  for (size_t i = 0; i < small; ++i) ASSERT_EQ(at(gotSmall, i), tagValue(prev + 7, i)) << i;
}

// The call returns while the stream is still held up by earlier work; the
// result is there after the stream sync, not before.
void asyncBody(coilComm_t comm, int rank, int n) {
  Stream stream, peek;
  const size_t count = 1 << 20;
  const auto in = makeInput(coilFloat32, coilSum, rank, n, count);
  const auto want = makeExpected(coilFloat32, coilSum, n, count);
  DeviceBuffer send(in), recv(in.size());
  CUDA_OK(cudaMemset(recv.get(), 0, in.size()));
  CUDA_OK(cudaDeviceSynchronize());  // one process per rank here: nothing else waits
  Gate gate;
  gate.hold(stream.s);
  const auto t0 = std::chrono::steady_clock::now();
  expectOk(coilAllReduce(send.get(), recv.get(), count, coilFloat32, coilSum, comm, stream.s), comm);
  EXPECT_LT(secondsSince(t0), 1.0) << "the call waited for its stream";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(cudaStreamQuery(stream.s), cudaErrorNotReady);
  // Read on a stream of its own: the legacy stream could share the held
  // stream's hardware queue and wait behind the gate (see main).
  std::vector<uint8_t> early(16);
  CUDA_OK(cudaMemcpyAsync(early.data(), recv.get(), early.size(), cudaMemcpyDeviceToHost, peek.s));
  CUDA_OK(cudaStreamSynchronize(peek.s));
  EXPECT_EQ(early, std::vector<uint8_t>(16, 0)) << "the output changed before the stream reached the call";
  gate.open();
  stream.sync();
  ASSERT_EQ(firstMismatch(coilFloat32, recv.download().data(), want.data(), count), SIZE_MAX);
}

// Mixing host and device buffers, or host buffers with a stream, is refused.
void argumentBody(coilComm_t comm, int, int) {
  Stream stream;
  DeviceBuffer dev(64);
  std::vector<float> host(16);
  EXPECT_EQ(coilAllReduce(host.data(), dev.get(), 16, coilFloat32, coilSum, comm, stream.s), coilInvalidArgument);
  EXPECT_NE(std::string(coilGetLastError(comm)).find("device memory"), std::string::npos) << coilGetLastError(comm);
  EXPECT_EQ(coilAllReduce(host.data(), host.data(), 16, coilFloat32, coilSum, comm, stream.s), coilInvalidArgument);
  EXPECT_NE(std::string(coilGetLastError(comm)).find("stream must be NULL"), std::string::npos) << coilGetLastError(comm);
  int device = -2;
  expectOk(coilCommCuDevice(comm, &device), comm);
  EXPECT_EQ(device, 0);
  // Host buffers still work on the same communicator, after device calls.
  expectOk(coilAllReduce(dev.get(), dev.get(), 16, coilFloat32, coilSum, comm, stream.s), comm);
  expectOk(coilAllReduce(host.data(), host.data(), 16, coilFloat32, coilSum, comm, nullptr), comm);
  coilResult_t async = coilInternalError;
  expectOk(coilCommGetAsyncError(comm, &async), comm);
  EXPECT_EQ(async, coilSuccess);
}

using Body = void (*)(coilComm_t, int, int);

// ---- ranks as processes (the harness forks them) -------------------------

class Procs : public ::testing::TestWithParam<int> {};

void inProcesses(int n, Body body) {
  runRanks({n, Launch::Processes, "", 300}, [&](coilComm_t comm, int rank) {
    Pool pool(kPoolBytes);
    tPool = &pool;
    body(comm, rank, n);
    tPool = nullptr;
  });
}

TEST_P(Procs, AllReduceEveryTypeAndOp) { inProcesses(GetParam(), allReduceBody); }
TEST_P(Procs, CollectivesOnWindows) { inProcesses(GetParam(), windowCollectivesBody); }
TEST_P(Procs, RootedCollectivesFromEveryRoot) { inProcesses(GetParam(), rootedBody); }
TEST_P(Procs, AllGatherReduceScatterAllToAll) { inProcesses(GetParam(), gatherScatterFamilyBody); }
TEST_P(Procs, SendRecvBothWaysInAGroup) {
  if (GetParam() > 1) inProcesses(GetParam(), sendRecvBody);
}
TEST_P(Procs, StagedAndWindowedCallsInOneGroup) {
  if (GetParam() > 1) inProcesses(GetParam(), mixedPathsGroupBody);
}
TEST_P(Procs, CallsReturnBeforeTheirStreamRuns) { inProcesses(GetParam(), asyncBody); }
TEST_P(Procs, ArgumentChecks) { inProcesses(GetParam(), argumentBody); }

// Two communicators of the same ranks (b split from a): each rank's call on
// a waits behind a gate on one stream while `onB(rank, n, b, running)` runs
// on another; it must not wait for a (the gate opens only after it), and
// a's stream must still be held when it returns. (Ranks that are threads on
// one device call in host order, staged_stream.h: their calls wait for
// their own stream, so this holds for ranks as processes.) Buffers come
// from the process's pool: a cudaFree would wait for the held stream.
using OnB = std::function<void(int rank, int n, coilComm_t b, const Stream& running)>;
void whileAnotherCommunicatorWaits(coilComm_t a, int rank, int n, const OnB& onB) {
  coilComm_t b = nullptr;
  expectOk(coilCommSplit(a, 0, rank, &b, nullptr), a);
  Gate gate;
  Stream held, running;
  {
    DeviceBuffer x(4096);
    gate.hold(held.s);
    expectOk(coilAllReduce(x.get(), x.get(), 1024, coilFloat32, coilSum, a, held.s), a);
    onB(rank, n, b, running);
    EXPECT_EQ(cudaStreamQuery(held.s), cudaErrorNotReady);
    gate.open();
    held.sync();  // a's call runs now
  }
  EXPECT_EQ(coilCommDestroy(b), coilSuccess);
}

// Two communicators of the same ranks, each on its own stream: a call on
// the second completes while the first one's stream is held up.
TEST_P(Procs, TwoCommunicatorsOnTwoStreamsDoNotWaitForEachOther) {
  inProcesses(GetParam(), [](coilComm_t a, int rank, int n) {
    whileAnotherCommunicatorWaits(a, rank, n, [](int, int, coilComm_t b, const Stream& running) {
      DeviceBuffer y(4096);
      expectOk(coilAllReduce(y.get(), y.get(), 1024, coilFloat32, coilSum, b, running.s), b);
      running.sync();  // would never return if b's call waited behind a's
    });
  });
}

// A call larger than the communicator's staging bytes (it passes through the block),
// and one that fits it, made while another communicator's stream waits.
TEST_P(Procs, LargeAndSmallCallsWhileAnotherStreamWaits) {
  inProcesses(GetParam(), [](coilComm_t a, int rank, int n) {
    whileAnotherCommunicatorWaits(a, rank, n, [](int r, int n, coilComm_t b, const Stream& running) {
      const size_t large = (size_t{40} << 20) / 4 + 7;  // past the 32 MiB of staging
      const size_t small = 70001;
      for (const size_t count : {large, small}) {
        DeviceBuffer y(count * 4);
        y.upload(tagged(r, count), running.s);  // not on the legacy stream (upload())
        expectOk(coilAllReduce(y.get(), y.get(), count, coilInt32, coilSum, b, running.s), b);
        running.sync();
        const std::vector<uint8_t> got = y.download(running.s);
        for (size_t i = 0; i < count; i += 997) {
          int32_t want = 0;
          for (int q = 0; q < n; ++q) want += tagValue(q, i);
          ASSERT_EQ(at(got, i), want) << "count " << count << ", element " << i;
        }
      }
    });
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, Procs, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// A rank that dies: the survivors' enqueued call fails (asynchronously),
// their stream is released, and nothing hangs.
TEST(ProcsFault, AKilledRankBecomesAnErrorNotAHang) {
  runRanksRaw({3, Launch::Processes, "", 120}, [](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, 3, rank, 10'000);
    ASSERT_NE(comm, nullptr);
    Stream stream;
    DeviceBuffer buf(4096 * 4);
    expectOk(coilAllReduce(buf.get(), buf.get(), 4096, coilFloat32, coilSum, comm, stream.s), comm);
    stream.sync();
    if (rank == 1) _exit(0);  // dies without a word
    const auto t0 = std::chrono::steady_clock::now();
    expectOk(coilAllReduce(buf.get(), buf.get(), 4096, coilFloat32, coilSum, comm, stream.s), comm);
    stream.sync();  // must come back: the failed call still releases the stream
    coilResult_t async = coilSuccess;
    expectOk(coilCommGetAsyncError(comm, &async), comm);
    EXPECT_NE(async, coilSuccess) << "a dead peer went unnoticed";
    EXPECT_LT(secondsSince(t0), 10.0);
    coilCommDestroy(comm);
  });
}

// ---- ranks as threads of this process (coilCommInitAll) ------------------

class Threads : public ::testing::TestWithParam<int> {};

void inThreads(int n, Body body) {
  std::vector<coilComm_t> comms(n);
  const std::vector<int> devices(n, 0);  // several ranks on one GPU
  ASSERT_EQ(coilCommInitAll(comms.data(), n, devices.data()), coilSuccess) << coilGetLastError(nullptr);
  std::vector<std::unique_ptr<Pool>> pools;
  for (int r = 0; r < n; ++r) pools.push_back(std::make_unique<Pool>(kPoolBytes));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
      tPool = pools[r].get();
      body(comms[r], r, n);
      tPool = nullptr;
    });
  for (auto& t : threads) t.join();
  pools.clear();  // every rank's calls are done
  for (coilComm_t c : comms) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
}

TEST_P(Threads, AllReduceEveryTypeAndOp) { inThreads(GetParam(), allReduceBody); }
TEST_P(Threads, CollectivesOnWindows) { inThreads(GetParam(), windowCollectivesBody); }
TEST_P(Threads, RootedCollectivesFromEveryRoot) { inThreads(GetParam(), rootedBody); }
TEST_P(Threads, AllGatherReduceScatterAllToAll) { inThreads(GetParam(), gatherScatterFamilyBody); }
TEST_P(Threads, SendRecvBothWaysInAGroup) {
  if (GetParam() > 1) inThreads(GetParam(), sendRecvBody);
}
TEST_P(Threads, StagedAndWindowedCallsInOneGroup) {
  if (GetParam() > 1) inThreads(GetParam(), mixedPathsGroupBody);
}

// Eight ranks as threads on one GPU, each thread copying on the legacy
// stream between its calls. In stream order this hung on an H100
// (2026-11-26), with 8 hardware queues and, once, with 32: a rank's copies
// queued behind another rank's wait (staged_stream.h). Host order puts no
// wait on any stream.
TEST(ThreadsManyRanks, EightRanksOnOneGpu) { inThreads(8, allReduceBody); }

INSTANTIATE_TEST_SUITE_P(Threads, Threads, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// Empty when a device is usable, else why not: asked in a child process,
// so that this one has not initialised CUDA when the harness forks ranks.
std::string whyNoDevice() {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    const std::string why = coil::device::describeCudaUnusable(err, count);
    if (write(fds[1], why.data(), why.size()) < 0) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  std::string why;
  char buf[256];
  for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) > 0;) why.append(buf, static_cast<size_t>(k));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "the CUDA probe process failed";
  return why;
}

}  // namespace
}  // namespace coil::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // The tests' gates are waits of their own on a stream: every queue the
  // device has keeps the few other streams of a rank out of theirs (CUDA
  // hands queues to streams in turn; staged_stream.h). Set before any
  // process here makes a CUDA context.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
  const std::string why = coil::test::whyNoDevice();
  if (!why.empty()) {
    std::printf("gpu suite: skipped: no usable CUDA device (%s)\n", why.c_str());
    return 77;
  }
  return RUN_ALL_TESTS();
}
