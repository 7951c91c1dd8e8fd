// The message size the cost model is asked about for a call: shared by the
// algorithm choice (collective_driver.cc) and coilGroupSimulateEnd's
// estimate (estimate.cc), so that both see the same size.
#pragma once

#include <cstddef>

#include "algorithms/fingerprint.h"

namespace coil {

/// Bytes the cost model sees for a call of `kind` whose block is `bytes`:
/// the per-rank buffer, or all blocks together for the collectives whose
/// buffer holds one block per rank.
inline size_t modelBytes(algo::CollKind kind, size_t bytes, int nranks) {
  switch (kind) {
    case algo::CollKind::AllGather:
    case algo::CollKind::ReduceScatter:
    case algo::CollKind::AllToAll:
    case algo::CollKind::Gather:
    case algo::CollKind::Scatter: return bytes * static_cast<size_t>(nranks);
    default: return bytes;
  }
}

}  // namespace coil
