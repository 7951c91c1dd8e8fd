// coil's unique id through torchrun's store, as ProcessGroupNCCL exchanges
// NCCL's: rank 0 makes an id (its root on a port the kernel picks) and sets
// it under a key; every other rank waits for the key.
#pragma once

#include <cstdint>

#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher_env.h"

namespace coil {

/// The id of this process's next coilCommInitFromEnv. The key is the
/// launch's prefix plus a count of the calls this process made, so that
/// every rank must call it equally often, in the same order (as every
/// communicator init requires anyway). Waits at most COIL_TIMEOUT_MS
/// (default 30 min), as a root waits for its ranks.
UniqueIdData uniqueIdThroughStore(const StoreRendezvous& store, int rank);

}  // namespace coil
