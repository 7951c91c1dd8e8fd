// Ring all-reduce: reduce-scatter then all-gather. See ring.cc for the step table.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/primitives.h"

namespace coil::algo {

/// Runs this rank's part of a ring all-reduce of shape.count elements.
void ringAllReduce(Primitives& p, const CallShape& shape);

/// The same ring over a subset of the ranks and a span of the buffer:
/// `members` are the ring's ranks in ring order (null: ranks 0 .. n-1),
/// `me` this rank's index among them; elements [offset, offset + count).
/// With one member it only finishes the span (copy, which applies fin()).
/// The hierarchical all-reduce runs one per rail.
void ringAllReduceOver(Primitives& p, const std::vector<int>* members, int n, int me,
                       size_t offset, size_t count, size_t chunkElems);

}  // namespace coil::algo
