#include "api/group_estimate.h"

#include "api/guard.h"

namespace coil::api {

void checkSimInfo(const coilSimInfo_t* info) {
  if (info == nullptr) fail(coilInvalidArgument, "simInfo is NULL");
  if (info->size < sizeof(coilSimInfo_t) || info->magic != COIL_SIM_INFO_MAGIC)
    fail(coilInvalidArgument,
         "simInfo was not initialised with COIL_SIM_INFO_INITIALIZER (bad size or magic)");
}

double estimateUs(coilComm* comm, const std::vector<CollectiveCall>& collectives,
                  const std::vector<P2pCall>& p2p) {
  InFlight busy(comm);
  const Communicator& c = usable(comm);
  double us = 0;
  for (const CollectiveCall& call : collectives) us += c.estimateUs(call);
  return us + c.estimateUs(p2p);
}

}  // namespace coil::api
