// Collectives with several tensors per process: c10d's legacy lists, one
// tensor per local device in old multi-GPU DDP, which ProcessGroup.allreduce,
// broadcast and allgather still accept. gloo runs them; so does coil, with
// the same results:
//   allreduce([t0..tk-1])   every ti = the reduction over all ranks and all
//                           k entries (the entries are reduced here first,
//                           then one coil all-reduce of one entry's size)
//   broadcast(.., rootTensor)  every ti on every rank = the root's t[rootTensor]
//   allgather(outs, ins)    each of the k output lists = every rank's k
//                           inputs, rank after rank (one coil all-gather of
//                           the inputs laid end to end)
// One difference: for AVG gloo divides only entry 0 and leaves the others
// summed; coil gives every entry the average.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "coil.h"

namespace coil_torch {

/// A new contiguous tensor holding `entries` (one dtype and shape, at least
/// one) combined elementwise by `op`, the coil operator the ranks then
/// reduce with (for coilAvg and pre-multiplied sums the entries are summed:
/// the factor applies once, to the total). Worker thread.
at::Tensor combineEntries(const std::vector<at::Tensor>& entries, coilRedOp_t op);

/// Copies `value` into every tensor of `targets` (same numel).
void copyIntoEach(const at::Tensor& value, std::vector<at::Tensor>& targets);

}  // namespace coil_torch
