// Calls on device buffers: which memory a call's buffers are, and running
// a call in the order of the caller's CUDA stream (device/staged_stream.h).
//
// A call whose buffers are all device memory is enqueued on its stream and
// returns at once; one whose buffers are all host memory runs now, as coil
// always did, and needs a NULL stream. Mixing the two in one call is
// coilInvalidArgument. Host calls on a communicator first wait for its
// device calls still queued: every rank then runs its calls in the order
// its program made them, which is the order the peers expect.
#pragma once

#include <functional>
#include <vector>

#include "api/handle.h"
#include "device/staged_stream.h"

namespace coil::api {

/// The bytes a call reads and writes on this rank.
struct CallBuffers {
  const void* send;
  size_t sendBytes;
  const void* recv;
  size_t recvBytes;
};

/// At communicator init, where a CUDA device is usable: records the current
/// device as the communicator's, and makes its StagedStream now (it
/// allocates pinned memory, which must not happen while a stream waits).
void attachDevice(coilComm* comm);

/// True when the call's buffers are device memory (then any stream goes);
/// false for host memory (then the stream must be NULL). Throws
/// coilInvalidArgument for a mix, or for host buffers with a stream.
bool onDevice(const CallBuffers& buffers, coilStream_t stream);

/// Appends the staged ranges of a call: send read, recv written.
void addRanges(const CallBuffers& buffers, std::vector<device::DeviceRange>* ranges);

/// `call` with its buffers replaced by their staged host copies.
CollectiveCall hostCall(const CollectiveCall& call, const device::StagedStream::HostOf& hostOf);
P2pCall hostCall(const P2pCall& call, const device::StagedStream::HostOf& hostOf);
/// The ranges of one call's buffers (device calls; empty for host ones).
std::vector<device::DeviceRange> rangesOf(const CallBuffers& buffers, bool device);

/// Runs a call: on device buffers, `work` is enqueued on `stream` and runs
/// later on the communicator's host engine over staged copies of `ranges`
/// (`what` names the call in the asynchronous error a failure leaves); on
/// host buffers it runs now, after the device calls queued before it, with
/// every pointer its own host copy.
using HostOf = device::StagedStream::HostOf;
using CallWork = std::function<void(Communicator& c, const HostOf& hostOf)>;
/// The device half of runOrEnqueue.
void enqueueOnStream(coilComm* comm, const std::vector<device::DeviceRange>& ranges,
                     coilStream_t stream, const char* what, CallWork work);
/// The communicator, once the device calls queued before a host call ran.
Communicator& readyForHostCall(coilComm* comm);
/// Maps every pointer to itself: a host call's buffers are their own copies.
const HostOf& hostBuffersAsTheyAre();

/// A template, so that a host call builds no CallWork: a work capturing its
/// call outgrows std::function's inline storage, and the heap allocation
/// showed in the profile of the 0.2 µs all-reduce.
template <typename Work>
void runOrEnqueue(coilComm* comm, bool device, const std::vector<device::DeviceRange>& ranges,
                  coilStream_t stream, const char* what, Work&& work) {
  if (!device) return work(readyForHostCall(comm), hostBuffersAsTheyAre());
  enqueueOnStream(comm, ranges, stream, what, CallWork(std::forward<Work>(work)));
}

/// Enqueues a collective that runs on the peers' mapped device memory
/// (api/peer_windows.h, algorithms/device_window_collectives.h) on `stream`.
void enqueuePeerCall(coilComm* comm, const CollectiveCall& call, coilStream_t stream,
                     const char* what);

/// Enqueues a batch of sends and receives (a group's) that moves through
/// the peers' mapped device memory (algorithms/device_window_p2p.h) on
/// `stream`.
void enqueuePeerP2p(coilComm* comm, const std::vector<P2pCall>& calls, coilStream_t stream,
                    const char* what);

/// Enqueues a call whose buffers lie in windows the ranks registered
/// (api/registered_windows.h, algorithms/registered_collectives.h) on `stream`.
void enqueueRegisteredCall(coilComm* comm, const CollectiveCall& call,
                           const RegisteredCall& windows, coilStream_t stream, const char* what);

/// True when `call` on a communicator of one rank only copies its input
/// to its output (a built-in op, or no op): then a device call is one copy
/// on its stream, not a trip through host memory.
bool copiesOnOneRank(const coilComm* comm, const CollectiveCall& call, const CallBuffers& use);
void enqueueOneRankCopy(coilComm* comm, const CallBuffers& use, coilStream_t stream);

/// Waits for the communicator's device calls still queued (before a host
/// call, which must follow them).
void drainStaged(coilComm* comm);

}  // namespace coil::api
