// Making a communicator's handle and running its init, shared by the
// exported functions that create communicators (init, split, shrink).
#pragma once

#include "api/handle.h"
#include "bootstrap/bootstrap.h"

namespace coil::api {

/// When and where an init runs.
enum class InitMode {
  kBlocking,             ///< now, on the caller's thread; a failure throws and no handle remains
  kNonBlocking,          ///< on the handle's init thread; the caller returns coilInProgress
  kDeferredBlocking,     ///< at the outermost coilGroupEnd, which waits for it
  kDeferredNonBlocking,  ///< started at the outermost coilGroupEnd, which returns coilInProgress
};

/// The mode of an init with this blocking setting. `deferrable`: the caller
/// is one of the coilCommInitRank* functions, whose inits a group defers
/// (as NCCL's); a split or shrink is itself collective over a live parent
/// and runs at once.
InitMode initModeFor(bool blocking, bool deferrable);

/// Creates the handle of rank `rank` of `nranks` and runs, starts or defers
/// its init per `mode`. `share`: the parent's links, for a child of a split
/// with splitShare=1.
coilComm* createHandle(const UniqueIdData& id, int nranks, int rank, const CommOptions& opts,
                       InitMode mode, SharedLinks share = {});

/// coilCommInitRank and its variants: validates, then createHandle. Returns
/// coilInProgress for a non-blocking init outside a group.
coilResult_t initRank(coilComm_t* out, int nranks, const coilUniqueId& commId, int rank,
                      const coilConfig_t* config, const char* function);

}  // namespace coil::api
