// all_gather into tensors of different sizes ("all_gather_v"): output r
// receives rank r's input, whose size is output r's. ProcessGroupNCCL allows
// it (as broadcasts in one coalesced group); gloo refuses it. coil's
// coilAllGather takes equal blocks, so this picks the cheaper of two ways
// (per rank, in elements, for n ranks, largest input m and all inputs
// together T):
//   * padded: every input padded to m, one coilAllGather of m per rank:
//     (n-1)*m received, the ideal T - (this rank's) when the sizes are
//     equal, up to n times it when one rank holds everything; one call;
//   * broadcasts: rank r's input broadcast from r, one coilBroadcast per
//     rank with data, in one coil group: the ideal, in up to n calls.
// Padded wins while n*m <= 2*T (at most twice the ideal, and one call), as
// in uneven_reduce_scatter.h. Every rank computes the same choice from the
// same sizes, so all ranks make the same coil calls; ranks that disagree on
// the sizes get coil's error for mismatched calls.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "coil.h"

namespace coil_torch {

/// outs[r] = rank r's `mine` (outs[rank] has mine's size; the others may
/// differ, and every rank passes the same sizes). Worker thread; throws
/// c10::DistBackendError on a coil failure.
void allGatherUneven(const at::Tensor& mine, std::vector<at::Tensor>& outs, int rank,
                     coilComm_t comm);

}  // namespace coil_torch
