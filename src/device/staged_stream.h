// StagedStream: runs coil's host engine on device buffers, in the order of
// the caller's CUDA stream, without blocking the caller.
//
// Everything a call asks of the GPU goes on the caller's stream, at the
// call, around one wait (a call that fits the pinned staging block):
//
//   wait for the block's previous user     (an event: CUDA sees it)
//   copy the inputs into the pinned block
//   record `ready`
//   wait until a host word reaches this call's ticket   (cuStreamWaitValue32)
//   copy the outputs back from the block
//   record `blockFree`
//
// and this object's proxy thread, taking the calls in order, waits for
// `ready` on the host, runs the body (a host collective over the staged
// copies) and stores the ticket into the word, which lets the stream go on.
// The proxy itself never asks the GPU for anything. So the call returns at
// once, the work after it on the stream sees its results, no kernel spins
// (processes sharing a GPU without MPS cannot run kernels side by side),
// and nothing the proxy needs can be queued behind a waiting stream.
//
// That last point is why the copies are the caller's. A GPU serves its
// streams from a few hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by
// default), and streams that share a queue run in submission order: a
// stream waiting on the word holds up every stream that shares its queue.
// An earlier design had the proxy copy on a stream of its own; on an H100
// (2026-11-26) that stream shared a queue with a waiting stream often
// enough that eight ranks as threads hung, and four did with two
// communicators, until the device had 32 queues. Here a rank's progress
// needs only its own stream to reach its call, which its own wait cannot
// prevent. Ranks that are threads of one process (coilCommInitAll) still
// share queues with each other's waits: one rank's copies can sit behind
// another's wait, which coilCommInitAll makes unlikely by asking for every
// queue (its note in api/comm_lifecycle.cc).
//
// A call larger than the staging bytes (COIL_STAGING_BYTES, 32 MiB by
// default, per communicator) is staged in plain host memory and passes
// through the pinned block a block at a time: the stream copies a block in
// and waits while the proxy moves it to host memory, and after the body the
// proxy fills the block and the stream waits, then copies it out. Calls on
// other streams wait for the block's previous user first, so the block is
// never written under another call.
//
// Ranks that are threads of one process on one device are the exception
// (Order::kHost). Their streams share the device's hardware queues, so one
// rank's copies, or its thread's copy on the legacy stream, can sit behind
// another rank's wait for a call that this rank has yet to make: they
// deadlock, whatever the number of queues (two H100 runs, 2026-11-26: eight
// ranks hung with 32 queues; four did once streams, made and destroyed
// test after test, came round to a queue in use). A call in host order
// puts no wait on any stream: it copies the inputs in on the caller's
// stream, waits on the host for that stream to reach them, runs the body on
// the calling thread and queues the copies out. It returns later than a
// call in stream order (after the work before it on its stream), and a
// stream held up by the application holds up the call; but no rank's
// progress waits for another rank's stream. NCCL does not let two ranks
// share a device at all.
//
// No CUDA allocation after init: pinned allocation and cudaFree are
// implicit synchronisation points, and one of them while a stream waits for
// a ticket that only a later call releases never returns (a test's cudaFree
// did just that on an H100). So the word, the pinned block and a few events
// are made in the constructor (at communicator init); the same holds for
// users: in one process, a cudaFree while another rank's call waits for
// this rank's call can deadlock, as with NCCL.
//
// A body that throws still releases the stream, and the error goes to
// `onError`, which the API turns into the communicator's asynchronous
// error, as NCCL reports errors of enqueued work through
// ncclCommGetAsyncError. As in NCCL, the outputs of a failed call are
// undefined (the copies back were queued at the call).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
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
  /// `stagingBytes`: calls up to this size are staged in the pinned block
  /// (0: every call passes through it), which is at least kMinBlockBytes.
  StagedStream(int device, OnError onError, size_t stagingBytes = kDefaultStagingBytes);
  static constexpr size_t kDefaultStagingBytes = size_t{32} << 20;
  static constexpr size_t kMinBlockBytes = size_t{4} << 20;
  /// Waits for every enqueued job to run, then frees what it made.
  ~StagedStream();
  StagedStream(const StagedStream&) = delete;
  StagedStream& operator=(const StagedStream&) = delete;

  /// kStream: the call returns at once and its stream waits for the body.
  /// kHost: the call returns after the body ran, its stream never waits on
  /// the host (for ranks that share a device in one process; above).
  enum class Order { kStream, kHost };

  /// Enqueues a job on `stream` (a cudaStream_t; nullptr is the legacy
  /// default stream): in stream order it returns at once; in host order it
  /// runs the body first, and a body's error is thrown here. Thread-safe.
  void enqueue(const std::vector<DeviceRange>& ranges, Body body, Stream stream,
               Order order = Order::kStream);
  /// One step of a call that hands over between the GPU and the host more
  /// than once (an all-reduce over peers' mapped device memory,
  /// algorithms/device_window_collectives.h). `onStream` puts GPU work on the
  /// stream, at the call; `onHost` runs on the proxy once the stream has
  /// done that work (a host barrier with the peers, say); the stream's next
  /// phase, and whatever follows the call, waits for it.
  struct Phase {
    std::function<void(Stream)> onStream;
    std::function<void()> onHost;
  };
  /// Enqueues `phases` on `stream` as one job, in order with every other
  /// job of this object. Stream order: returns at once (an `onHost` error
  /// goes to onError, and the later phases' GPU work still runs, on
  /// undefined data). Host order: runs each phase's GPU work, waits for the
  /// stream, then runs its host step; an error is thrown here.
  void enqueuePhases(std::vector<Phase> phases, Stream stream, Order order = Order::kStream);
  /// Blocks until every body enqueued so far has run (host work that must
  /// follow them in program order calls this first).
  void drain();

 private:
  struct Span {  // a run of overlapping ranges, staged as one piece
    uintptr_t lo, hi;
    size_t offset;  // in the staging memory
  };
  struct Piece {  // part of a device range, its place in host staging and in the block
    const void* device;
    size_t hostOffset, blockOffset, bytes;
  };
  struct Trip {  // one pass of a large call's data through the pinned block
    uint32_t ticket = 0;   // the stream waits for it
    Event event = nullptr; // in: the block is full; out: the stream has emptied it
    std::vector<Piece> pieces;
  };
  struct Job {
    std::vector<Span> spans;
    size_t total = 0;
    bool inBlock = false;  // the body runs on the block: one inbound trip, no pieces
    std::vector<Trip> inbound, outbound;
    uint32_t lastTicket = 0;
    Body body;  // empty: the enqueue failed half-way; only its tickets to release
    std::vector<Phase> phases;  // a phased job (then no body): inbound[i] is phase i's trip
    bool runnable() const { return body || !phases.empty(); }
  };

  static std::vector<Span> layout(const std::vector<DeviceRange>& ranges, size_t* total);
  /// Where a device pointer inside one of `spans` is staged, from the
  /// staging memory's start; nothing for any other pointer.
  static std::optional<size_t> stagedOffset(const std::vector<Span>& spans, const void* p);
  /// The same at `base`; nullptr for a pointer outside the spans.
  static uint8_t* stagedAddress(const std::vector<Span>& spans, uint8_t* base, const void* p);
  /// The body's view of a job staged at `base` (the block, or host staging).
  static HostOf stagedIn(const std::vector<Span>& spans, uint8_t* base);
  std::vector<Trip> trips(const std::vector<DeviceRange>& ranges, const std::vector<Span>& spans,
                          bool inbound) const;
  void enqueueOn(Job& job, const std::vector<DeviceRange>& ranges, Stream stream);
  void runInHostOrder(Job& job, const std::vector<DeviceRange>& ranges, Stream stream);
  void inHostOrder(Stream stream, const std::function<void()>& run);
  void enqueuePhasesOn(Job& job, const std::vector<Phase>& phases, Stream stream);
  void runPhasesInHostOrder(const std::vector<Phase>& phases, Stream stream);
  void runPhases(Job& job);
  // The copies both orders make (inbound: towards the host side).
  void copyRanges(const Job& job, const std::vector<DeviceRange>& ranges, bool inbound, Stream stream);
  void copyTrip(const Trip& t, bool inbound, Stream stream);  // device <-> block, on the stream
  void moveTrip(const Trip& t, bool inbound, uint8_t* host);   // block <-> host staging, here
  uint8_t* hostStaging(size_t bytes);  // plain host memory, for calls past the staging bytes
  Event takeEvent();
  // Makes the stream wait, after the work queued so far, for the proxy to
  // reach a new ticket; and records an event there for the proxy.
  void recordOn(Trip& t, Stream stream);
  void waitFor(Job& job, Trip& t, Stream stream);
  void returnEvents(const Job& job);  // to the pool; mutex_ held
  void submit(Job&& job);             // to the proxy; mutex_ held
  void submitOnceQueued(Job& job, Stream stream, const std::function<void()>& queue);
  void release(uint32_t ticket);
  void run(Job& job);
  void proxyLoop();

  const int device_;
  const OnError onError_;
  volatile uint32_t* word_ = nullptr;  // pinned, mapped: the streams wait on it
  uint8_t* block_ = nullptr;           // pinned: calls are staged here, or pass through it
  size_t blockBytes_ = 0;
  size_t stagingBytes_ = 0;            // calls up to this size run in the block
  Event blockFree_ = nullptr;          // recorded after the block's latest user's last copy
  std::mutex enqueueMutex_;            // one enqueue at a time: tickets in stream order
  uint32_t issued_ = 0;                // guarded by enqueueMutex_

  // The proxy's own (or, in host order, the enqueuer's, under
  // enqueueMutex_): host staging memory, grown to the largest large call.
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
