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
/// (as NCCL's). A split in a group is deferred as a whole (planning
/// included), so its child's init runs at once once the split runs; a
/// shrink runs at once.
InitMode initModeFor(bool blocking, bool deferrable);

/// Creates the handle of rank `rank` of `nranks` and runs, starts or defers
/// its init per `mode`. `share`: the parent's links, for a child of a split
/// with splitShare=1.
coilComm* createHandle(const UniqueIdData& id, int nranks, int rank, const CommOptions& opts,
                       InitMode mode, SharedLinks share = {});

/// The split of coilCommSplit, arguments checked: collective over `comm`.
/// Sets *newcomm (NULL for COIL_SPLIT_NOCOLOR) and *mode, the child init's.
void splitNow(coilComm* comm, int color, int key, coilComm_t* newcomm, CommOptions opts,
              bool blocking, InitMode* mode);

/// coilCommInitRank and its variants: validates, then createHandle. Returns
/// coilInProgress for a non-blocking init outside a group.
coilResult_t initRank(coilComm_t* out, int nranks, const coilUniqueId& commId, int rank,
                      const coilConfig_t* config, const char* function);

}  // namespace coil::api
