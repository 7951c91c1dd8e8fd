// Ring all-reduce: reduce-scatter then all-gather. See ring.cc for the step table.
#pragma once

#include "algorithms/primitives.h"

namespace coil::algo {

/// Runs this rank's part of a ring all-reduce of shape.count elements.
void ringAllReduce(Primitives& p, const CallShape& shape);

}  // namespace coil::algo
