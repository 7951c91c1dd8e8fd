// All-reduce (sum) of sparse COO tensors, as gloo offers it.
//
// coil reduces dense buffers, and ranks' sparse tensors hold different
// points. So every rank gathers every rank's (indices, values) and sums the
// duplicates itself: three all-gathers (a small header, then the indices and
// the values padded to the largest nnz), then one coalesce. Each rank
// concatenates the pieces in rank order and coalesces the same input, so all
// ranks get the same result. Cost: every rank receives all ranks' nonzeros
// ((p-1) * max nnz * (sparse dims * 8 + value bytes)), which is what a
// sparse sum with unknown overlap needs without a dense buffer.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "coil.h"

namespace coil_torch {

/// Throws c10::Error unless `t` is a sparse COO tensor on the CPU or a CUDA
/// device and `op` is SUM. Caller's thread.
void checkSparseAllReduce(const at::Tensor& t, const c10d::ReduceOp& op);

/// Replaces `t` (sparse COO) by the sum of every rank's `t`, coalesced. A
/// CUDA tensor is copied to the host, reduced there and copied back (on the
/// current stream: the work's side stream).
/// Throws c10::DistBackendError on a coil failure, and c10::Error when ranks
/// disagree on the tensor's shape or dtype. Worker thread.
void sparseAllReduceSum(at::Tensor& t, int size, coilComm_t comm);

}  // namespace coil_torch
