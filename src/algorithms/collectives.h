// Every collective algorithm coil has, as per-rank programs over Primitives.
//
// Each is pure scheduling: which span goes to or comes from which rank, in
// which order. The collective driver (src/comm/collective_driver.cc) sets up
// the buffers (for example input == output for algorithms that accumulate in
// place) and the executor moves the data. Step tables and cost formulas:
// docs/algorithms.md.
#pragma once

#include "algorithms/primitives.h"

namespace coil::algo {

// ring.cc
void ringAllReduce(Primitives& p, const CallShape& shape);
// ring_family.cc — pipelined rings and chains
void ringBroadcast(Primitives& p, const CallShape& shape);      // input == output except on root
void chainReduce(Primitives& p, const CallShape& shape);        // result on shape.root
void ringAllGather(Primitives& p, const CallShape& shape);      // count = per-rank block; input == output
void ringReduceScatter(Primitives& p, const CallShape& shape);  // count = per-rank block
// direct.cc — one message per pair
void pairwiseAllToAll(Primitives& p, const CallShape& shape);   // count = per-pair block
void directGather(Primitives& p, const CallShape& shape);       // count = per-rank block
void directScatter(Primitives& p, const CallShape& shape);      // count = per-rank block
// tree.cc — binary trees (input == output: they accumulate in place)
void doubleTreeAllReduce(Primitives& p, const CallShape& shape);
void treeBroadcast(Primitives& p, const CallShape& shape);
void treeReduce(Primitives& p, const CallShape& shape);  // result on shape.root; ranks with two
                                                         // children accumulate in place
// hierarchical.cc — inside each host, across hosts on rails, inside again
// (shape.hostOf; input == output)
void hierarchicalAllReduce(Primitives& p, const CallShape& shape);
void hierarchicalAllGather(Primitives& p, const CallShape& shape);  // count = per-rank block;
                                                                    // input == output
void hierarchicalReduceScatter(Primitives& p, const CallShape& shape);  // count = per-rank block;
                                                                        // in place on n blocks
// ... and chains host by host (separate buffers, as the flat chains)
void hierarchicalBroadcast(Primitives& p, const CallShape& shape);
void hierarchicalReduce(Primitives& p, const CallShape& shape);

}  // namespace coil::algo
