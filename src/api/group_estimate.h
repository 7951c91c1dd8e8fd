// coilGroupSimulateEnd's half of the group: checking the caller's
// coilSimInfo_t and estimating one communicator's queued calls.
#pragma once

#include <vector>

#include "api/handle.h"

namespace coil::api {

/// Throws coilInvalidArgument unless `info` was set up with
/// COIL_SIM_INFO_INITIALIZER (size, magic, version).
void checkSimInfo(const coilSimInfo_t* info);

/// Predicted µs for `comm` to run its queued calls in order (the
/// collectives one after the other, then the point-to-point batch).
/// Throws as usable() for a communicator that cannot run them.
double estimateUs(coilComm* comm, const std::vector<CollectiveCall>& collectives,
                  const std::vector<P2pCall>& p2p);

}  // namespace coil::api
