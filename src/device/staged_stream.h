// StagedStream: runs coil's host engine on device buffers, in the order of
// the caller's CUDA stream, without blocking the caller.
//
// A call puts two things on the caller's stream, and nothing else:
//
//   record `ready`
//   wait until a host word reaches this call's ticket   (cuStreamWaitValue32)
//
// and this object's proxy thread, taking the calls in order, waits for
// `ready`, copies the inputs to host staging memory on a stream of its own,
// runs the body (a host collective over the staged copies), copies the
// outputs back, and stores the ticket into the word, which lets the
// caller's stream go on. So the call returns at once, the work after it on
// the stream sees its results, and no kernel ever spins: the GPU's front
// end waits on a word in host memory. Processes sharing one GPU cannot
// deadlock each other through it (without MPS their kernels would not run
// side by side).
//
// What the caller's stream must not hold, learnt on an H100 (2026-11-26):
//  - copies queued behind the wait. A design that put the staging copies on
//    the caller's stream around the wait hung: a copy waiting there held
//    a copy engine's queue, and other streams' copies (another rank's, the
//    application's cudaMemcpy) queued behind it. So the proxy issues every
//    copy, on its own stream, only once the caller's stream has reached the
//    call.
//  - CUDA memory (de)allocation while a stream waits: pinned allocation and
//    cudaFree are implicit synchronisation points, and one of them while a
//    stream waits for a ticket that only a later call releases never
//    returns (a test's cudaFree did just that on the H100). So the word,
//    the proxy's stream, the pinned staging and a few events are made in
//    the constructor (at communicator init), and the same holds for users:
//    in one process, a cudaFree while another rank's call waits for this
//    rank's call can deadlock, as with NCCL.
//
// Staging: a call whose buffers fit the pinned block (COIL_STAGING_BYTES,
// 32 MiB by default, per communicator) is copied straight into it and the
// body runs there; a larger one goes through plain host memory, filled and
// drained a chunk at a time through a pinned bounce buffer (no pageable
// CUDA copies, whose driver path the application's own pageable copies
// share).
//
// This is the staging path: every byte crosses PCIe twice. It works between
// any ranks, on any transport; CUDA IPC between the ranks of one host builds
// on the registered-memory transport interface later.
//
// A body that throws still releases the stream, and the outputs are left as
// they were (the copies back are skipped); the error goes to `onError`,
// which the API turns into the communicator's asynchronous error, as NCCL
// reports errors of enqueued work through ncclCommGetAsyncError.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "device/device.h"

namespace coil::device {

/// One device buffer of a job: read before the body runs (in), written
/// back after it (out), or both. Ranges may overlap (in-place calls): the
/// staged copies keep their relative positions.
struct DeviceRange {
  const void* ptr;
  size_t bytes;
  bool in;
  bool out;
};

class StagedStream {
 public:
  /// The staged host copy of a device pointer inside the job's ranges (a
  /// pointer at a range's end included); nullptr for any other pointer.
  using HostOf = std::function<void*(const void* devicePtr)>;
  using Body = std::function<void(const HostOf& hostOf)>;
  using OnError = std::function<void(const Error& error)>;

  /// `device`: the communicator's device, made current on the proxy thread.
  /// `stagingBytes`: the pinned staging block (0: every call bounces).
  StagedStream(int device, OnError onError, size_t stagingBytes = kDefaultStagingBytes);
  static constexpr size_t kDefaultStagingBytes = size_t{32} << 20;
  /// Waits for every enqueued job to run, then frees what it made.
  ~StagedStream();
  StagedStream(const StagedStream&) = delete;
  StagedStream& operator=(const StagedStream&) = delete;

  /// Enqueues a job on `stream` (a cudaStream_t; nullptr is the legacy
  /// default stream) and returns. Thread-safe.
  void enqueue(const std::vector<DeviceRange>& ranges, Body body, Stream stream);
  /// Blocks until every body enqueued so far has run (host work that must
  /// follow them in program order calls this first).
  void drain();

 private:
  struct Span {  // a run of overlapping ranges, staged as one piece
    uintptr_t lo, hi;
    size_t offset;  // in the staging memory
  };
  struct Job {
    uint32_t ticket = 0;
    Event ready = nullptr;
    std::vector<DeviceRange> ranges;
    Body body;
  };

  static std::vector<Span> layout(const std::vector<DeviceRange>& ranges, size_t* total);
  uint8_t* hostStaging(size_t bytes);  // plain host memory, for calls past the pinned block
  void copyIn(uint8_t* host, const void* device, size_t bytes);
  void copyOut(void* device, const uint8_t* host, size_t bytes);
  Event takeEvent();
  void run(Job& job);
  void proxyLoop();

  const int device_;
  const OnError onError_;
  volatile uint32_t* word_ = nullptr;  // pinned, mapped: the streams wait on it
  Stream copies_ = nullptr;            // the proxy's stream for the staging copies
  uint8_t* bounce_ = nullptr;          // pinned: the large calls' copies go through it
  uint8_t* pinnedStaging_ = nullptr;   // pinned: the calls that fit are staged here
  size_t pinnedStagingBytes_ = 0;
  std::mutex enqueueMutex_;            // one enqueue at a time: tickets in stream order
  uint32_t issued_ = 0;                // guarded by enqueueMutex_

  // The proxy's own: host staging memory, grown to the largest large call.
  struct FreeBytes {
    void operator()(uint8_t* p) const noexcept;
  };
  std::unique_ptr<uint8_t, FreeBytes> hostStaging_;
  size_t hostStagingBytes_ = 0;

  std::mutex mutex_;  // the queue, the event pool and the counters below
  std::condition_variable changed_;
  std::deque<Job> queue_;
  std::vector<Event> freeEvents_;
  uint64_t enqueued_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::thread proxy_;
};

}  // namespace coil::device
