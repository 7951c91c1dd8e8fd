// The message size the cost model is asked about for a call: shared by the
// algorithm choice (collective_driver.cc) and coilGroupSimulateEnd's
// estimate (estimate.cc), so that both see the same size.
#pragma once

#include <cstddef>

#include "comm/communicator.h"
#include "reduce/reduce.h"

namespace coil {

/// Bytes the cost model sees: the per-rank buffer, or all blocks together
/// for the collectives whose buffer holds one block per rank.
inline size_t modelBytes(const CollectiveCall& c, int nranks) {
  const size_t b = c.count * reduce::typeSize(c.type);
  switch (c.kind) {
    case algo::CollKind::AllGather:
    case algo::CollKind::ReduceScatter:
    case algo::CollKind::AllToAll:
    case algo::CollKind::Gather:
    case algo::CollKind::Scatter: return b * static_cast<size_t>(nranks);
    default: return b;
  }
}

}  // namespace coil
