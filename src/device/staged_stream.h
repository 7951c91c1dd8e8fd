// StagedStream: runs coil's host engine on device buffers, in the order of
// the caller's CUDA stream, without blocking the caller.
//
// For each job, on the caller's stream:
//
//   copy the input ranges   device -> pinned host staging
//   record `ready`
//   wait until the host word reaches this job's ticket    (cuStreamWaitValue32)
//   copy the output ranges  pinned host staging -> device
//   record the staging block's `done`
//
// and on this object's proxy thread, in enqueue order: wait for `ready`, run
// the job's body (a host collective over the staged copies), store the
// ticket into the word. So the call returns at once, the stream holds back
// the work after it until the data is there, and no kernel ever spins: the
// GPU's front end waits on a word in host memory. Several processes on one
// GPU therefore cannot deadlock each other through it (without MPS their
// kernels would not run side by side).
//
// This is the staging path: every byte crosses PCIe twice. It is what the
// issue calls the path across hosts, and works between any ranks; CUDA IPC
// between the ranks of one host builds on the transport interface later.
//
// A body that throws still releases the stream (the outputs then hold
// whatever staging held); the error goes to `onError`, which the API turns
// into the communicator's asynchronous error, as NCCL reports errors of
// enqueued work through ncclCommGetAsyncError.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
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
  StagedStream(int device, OnError onError);
  /// Waits for every enqueued job to run, then frees the staging memory.
  ~StagedStream();
  StagedStream(const StagedStream&) = delete;
  StagedStream& operator=(const StagedStream&) = delete;

  /// Enqueues a job on `stream` (a cudaStream_t; nullptr is the legacy
  /// default stream) and returns. Thread-safe.
  void enqueue(const std::vector<DeviceRange>& ranges, Body body, Stream stream);
  /// Blocks until every body enqueued so far has run (host work that must
  /// follow them in program order calls this first).
  void drain();
  /// True while a body is queued or running.
  bool busy();

 private:
  struct Span {  // a run of overlapping ranges, staged as one block
    uintptr_t lo, hi;
    size_t offset;  // in the staging block
  };
  struct Staging {
    void* host = nullptr;
    size_t capacity = 0;
    Event done = nullptr;  // recorded after the job's copies back
  };
  struct Job {
    uint32_t ticket;
    Event ready;
    std::vector<Span> spans;
    uint8_t* base;
    Body body;
  };

  static std::vector<Span> layout(const std::vector<DeviceRange>& ranges, size_t* total);
  Staging& stagingFor(size_t bytes);
  Event takeEvent();
  void proxyLoop();
  void release(uint32_t ticket);

  const int device_;
  const OnError onError_;
  volatile uint32_t* word_ = nullptr;  // pinned, mapped: the streams wait on it
  std::mutex enqueueMutex_;            // one enqueue at a time: tickets in stream order
  std::vector<Staging> staging_;       // guarded by enqueueMutex_
  uint32_t issued_ = 0;                // guarded by enqueueMutex_

  std::mutex mutex_;  // the queue, the event pool and the counters below
  std::condition_variable changed_;
  std::deque<Job> queue_;
  std::vector<Event> freeEvents_;
  uint64_t enqueued_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::thread proxy_;
};

}  // namespace coil::device
