// coilGroupStart/End: calls made on this thread between them are queued here
// and issued together by the outermost coilGroupEnd.
#pragma once

#include <functional>

#include "api/device_calls.h"
#include "api/handle.h"
#include "comm/communicator.h"

namespace coil::api {

/// True while this thread is inside coilGroupStart/End.
bool inGroup();
/// Queues a collective on `comm` for the current group. `use`: the bytes
/// it reads and writes; `device`: whether they are device memory. A
/// communicator's calls in one group must agree on the memory kind and the
/// stream (coilInvalidUsage otherwise): device calls run as one job on the
/// stream at coilGroupEnd (device_calls.h).
void enqueueCollective(coilComm* comm, const CollectiveCall& call, const CallBuffers& use,
                       bool device, coilStream_t stream);
/// Queues a send or receive on `comm` for the current group.
void enqueueP2p(coilComm* comm, const P2pCall& call, const CallBuffers& use, bool device,
                coilStream_t stream);

/// A call that makes a communicator (an init or a split) inside a group.
/// As in NCCL, such calls run together at the outermost coilGroupEnd: one
/// thread may create (or split) every rank of a communicator between
/// coilGroupStart and coilGroupEnd, which would deadlock if each call waited
/// for the others on the spot.
struct DeferredCall {
  /// Runs the call, on a thread of its own when the group has several:
  /// coilSuccess, coilInProgress (a non-blocking init left running), or an
  /// error, whose message it stores in *why.
  std::function<coilResult_t(std::string* why)> run;
};
/// Queues such a call for the current group.
void enqueueDeferred(DeferredCall call);

}  // namespace coil::api
