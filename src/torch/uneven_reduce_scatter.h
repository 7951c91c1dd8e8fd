// reduce_scatter with blocks of different sizes, as gloo allows: block r of
// every rank's input list is reduced into rank r's output. coil's
// coilReduceScatter takes equal blocks, so this picks the cheaper of two
// ways to move it (per rank, in elements, for n ranks, largest block m and
// all blocks together T):
//   * padded: every block padded to m, one coilReduceScatter of n*m:
//     (n-1)*m sent and received, the ideal (n-1)/n*T when the blocks are
//     equal, up to n times it when one block holds everything;
//   * all-reduce: the blocks end to end, one coilAllReduce of T, then this
//     rank's block copied out: 2(n-1)/n*T, twice the ideal whatever the sizes.
// Padded wins while n*m <= 2*T. Every rank computes the same choice from the
// same sizes, so all ranks make the same coil call.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "coil.h"

namespace coil_torch {

/// out = the reduction over ranks of block `rank` of `blocks`; the blocks'
/// sizes may differ (every rank passes the same sizes). `type` and `op` are
/// the coil datatype and op of the reduction. Worker thread; throws
/// c10::DistBackendError on a coil failure.
void reduceScatterUneven(const at::Tensor& out, const std::vector<at::Tensor>& blocks, int rank,
                         coilDataType_t type, coilRedOp_t op, coilComm_t comm);

}  // namespace coil_torch
