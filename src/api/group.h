// coilGroupStart/End: calls made on this thread between them are queued here
// and issued together by the outermost coilGroupEnd.
#pragma once

#include <functional>

#include "api/handle.h"
#include "comm/communicator.h"

namespace coil::api {

/// True while this thread is inside coilGroupStart/End.
bool inGroup();
/// Queues a collective on `comm` for the current group.
void enqueueCollective(coilComm* comm, const CollectiveCall& call);
/// Queues a send or receive on `comm` for the current group.
void enqueueP2p(coilComm* comm, const P2pCall& call);

/// An init made inside a group. As in NCCL, the inits of a group run
/// together at the outermost coilGroupEnd: one thread may create every
/// rank of a communicator between coilGroupStart and coilGroupEnd, which
/// would deadlock if each init waited for the others on the spot.
struct DeferredInit {
  coilComm* comm;  // handed out already; its initState is coilInProgress
  bool blocking;   // false: coilGroupEnd starts it and returns coilInProgress
  /// The collective part of the init; stores its outcome in comm->initState.
  std::function<void()> run;
};
/// Queues an init for the current group.
void enqueueInit(DeferredInit init);

}  // namespace coil::api
