#include "tensor_lists.h"

#include <ATen/ATen.h>

namespace coil_torch {
namespace {

// acc = acc (op) next, in place; acc and next have one dtype and numel.
// torch's elementwise ops keep the dtype (float16/bfloat16 are computed in
// float32 and rounded, as coil's kernels do); on bool, max/min are OR/AND.
void combineInto(at::Tensor& acc, const at::Tensor& next, coilRedOp_t op) {
  switch (op) {
    case coilProd: acc.mul_(next); return;
    case coilMin: at::minimum_out(acc, acc, next); return;
    case coilMax: at::maximum_out(acc, acc, next); return;
    case coilBand: acc.bitwise_and_(next); return;
    case coilBor: acc.bitwise_or_(next); return;
    case coilBxor: acc.bitwise_xor_(next); return;
    default: acc.add_(next); return;  // coilSum, coilAvg, pre-multiplied sums
  }
}

}  // namespace

at::Tensor combineEntries(const std::vector<at::Tensor>& entries, coilRedOp_t op) {
  at::Tensor acc = entries.front().contiguous().clone().view({-1});
  for (size_t i = 1; i < entries.size(); ++i) combineInto(acc, entries[i].reshape({-1}), op);
  return acc;
}

void copyIntoEach(const at::Tensor& value, std::vector<at::Tensor>& targets) {
  for (at::Tensor& t : targets) t.copy_(value.view(t.sizes()));
}

}  // namespace coil_torch
