// coilCommShrink: a communicator of the parent's ranks less a listed few
// (NCCL 2.27's ncclCommShrink). The listed ranks do not call it.
#include <string>
#include <vector>

#include "api/comm_create.h"
#include "api/config.h"
#include "api/device_calls.h"
#include "api/guard.h"

using coil::api::guarded;

namespace coil::api {
namespace {

// The excluded parent ranks, checked: in range, distinct, not the caller,
// and not everyone.
std::vector<int> excludedRanks(const int* list, int count, int nranks, int self) {
  if (count < 0) fail(coilInvalidArgument, "excludeRanksCount must be >= 0 (got ", count, ")");
  if (count > 0 && list == nullptr)
    fail(coilInvalidArgument, "excludeRanksList is NULL but excludeRanksCount is ", count);
  std::vector<bool> seen(static_cast<size_t>(nranks), false);
  std::vector<int> excluded;
  for (int i = 0; i < count; ++i) {
    const int r = list[i];
    if (r < 0 || r >= nranks)
      fail(coilInvalidArgument, "excludeRanksList[", i, "] = ", r, " is out of range [0, ",
           nranks, ")");
    if (seen[static_cast<size_t>(r)])
      fail(coilInvalidArgument, "excludeRanksList names rank ", r, " twice");
    if (r == self)
      fail(coilInvalidArgument, "excludeRanksList names this rank (", r,
           "): an excluded rank does not call coilCommShrink");
    seen[static_cast<size_t>(r)] = true;
    excluded.push_back(r);
  }
  return excluded;
}

}  // namespace
}  // namespace coil::api

using namespace coil;

extern "C" coilResult_t coilCommShrink(coilComm_t comm, int* excludeRanksList,
                                       int excludeRanksCount, coilComm_t* newcomm,
                                       coilConfig_t* config, int shrinkFlags) {
  api::InitMode mode = api::InitMode::kBlocking;
  const coilResult_t rc = guarded("coilCommShrink", comm, [&] {
    api::InFlight busy(comm);
    if (newcomm == nullptr) fail(coilInvalidArgument, "newcomm is NULL");
    *newcomm = nullptr;
    if (shrinkFlags != COIL_SHRINK_DEFAULT && shrinkFlags != COIL_SHRINK_ABORT)
      fail(coilInvalidArgument, "shrinkFlags must be COIL_SHRINK_DEFAULT or COIL_SHRINK_ABORT (got ",
           shrinkFlags, ")");
    const std::vector<int> excluded =
        api::excludedRanks(excludeRanksList, excludeRanksCount, comm->nranks, comm->rank);
    CommOptions opts = api::optionsFrom(config);
    Communicator& c = api::usable(comm);
    if (shrinkFlags == COIL_SHRINK_DEFAULT) api::drainStaged(comm);  // abort mode: they fail anyway
    // Unset fields follow the parent, as a split's do.
    if (config == nullptr || config->timeoutMs <= 0) opts.timeoutMs = c.options().timeoutMs;
    if (opts.name.empty()) opts.name = c.options().name;
    if (opts.transport.empty()) opts.transport = c.options().transport;
    SplitPlan plan;
    if (shrinkFlags == COIL_SHRINK_ABORT) {
      // As coilCommRevoke: a call blocked on the parent returns, peers see
      // its connections close; then the remaining ranks meet anew.
      comm->abortFlag.store(true);
      c.closeAll();
      plan = c.planShrinkAfterAbort(excluded);
    } else {
      plan = c.planShrink(excluded);
    }
    mode = api::initModeFor(api::isBlocking(config), false);
    *newcomm = api::createHandle(plan.id, plan.nranks, plan.rank, opts, mode);
  });
  return rc == coilSuccess && mode == api::InitMode::kNonBlocking ? coilInProgress : rc;
}
