// The pipelined chains of broadcast and reduce (ring_family.cc), over any
// order of the ranks: `pos` is this rank's place in the chain, `prev` and
// `next` its neighbours there (unused at the ends). The flat algorithms
// chain the ranks in rank order from the root; the hierarchical ones
// (hierarchical.cc) host by host, so that each link between two hosts
// carries the data once.
#pragma once

#include "algorithms/primitives.h"

namespace coil::algo {

/// Broadcast: position 0 is the root, which sends from its input; the
/// others receive into their output and pass it on. Chunk by chunk.
void chainBroadcastAt(Primitives& p, const CallShape& shape, int pos, int prev, int next);

/// Reduce: the last position is the root, which finishes (fin) into its
/// output; the others add their input to what arrives and pass it on.
void chainReduceAt(Primitives& p, const CallShape& shape, int pos, int prev, int next);

}  // namespace coil::algo
