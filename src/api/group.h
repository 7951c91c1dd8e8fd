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

}  // namespace coil::api
