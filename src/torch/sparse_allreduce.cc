#include "sparse_allreduce.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sparse_coo_tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <vector>

#include "coil_calls.h"
#include "tensor_args.h"

namespace coil_torch {
namespace {

// What every rank tells the others first: its nnz, and what must agree.
enum Header { kNnz, kSparseDim, kDenseDim, kShapeAndType, kHeaderLength };

// FNV-1a over the sizes and the dtype: equal on ranks that agree.
int64_t shapeAndTypeHash(const at::Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t v) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= static_cast<uint64_t>(v >> (8 * byte)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (int64_t s : t.sizes()) mix(s);
  mix(static_cast<int64_t>(t.scalar_type()));
  return static_cast<int64_t>(h);
}

void allGather(const void* send, void* recv, Elements e, coilComm_t comm) {
  if (e.count == 0) return;  // nothing anywhere: every rank skips it alike
  check(coilAllGather(send, recv, e.count, e.type, comm, nullptr), "coilAllGather");
}

}  // namespace

void checkSparseAllReduce(const at::Tensor& t, const c10d::ReduceOp& op) {
  TORCH_CHECK(t.layout() == c10::kSparse, "coil backend: allreduce: sparse tensors must have the "
              "COO layout (torch.sparse_coo), got ", t.layout());
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "coil backend: allreduce: sparse "
              "tensors must be on the CPU or a CUDA device, got ", t.device().str());
  TORCH_CHECK(!t.is_cuda() || cudaTensorsEnabled(), "coil backend: allreduce: CUDA tensors are "
              "refused here (COIL_TORCH_CUDA=0; got a sparse tensor on ", t.device().str(),
              "); unset it, or move the tensor to the CPU");
  TORCH_CHECK(op == c10d::ReduceOp::SUM, "coil backend: allreduce of a sparse tensor supports "
              "ReduceOp.SUM only (as gloo does)");
}

void sparseAllReduceSum(at::Tensor& t, int size, coilComm_t comm) {
  if (!t.device().is_cpu()) {
    // As gloo: reduced on the host. With the side stream current (cuda_op.h)
    // the copy down follows the caller's writes, and the copy up is ordered
    // before the work's completion event.
    at::Tensor host = t.to(at::kCPU);
    sparseAllReduceSum(host, size, comm);
    t.copy_(host);
    return;
  }
  const at::Tensor input = t.coalesce();
  const int64_t nnz = input._nnz();
  const int64_t sparseDim = input.sparse_dim();
  const at::Tensor indices = input._indices().contiguous();  // [sparseDim, nnz], int64
  const at::Tensor values = input._values().contiguous();    // [nnz, dense sizes...]

  std::array<int64_t, kHeaderLength> mine{nnz, sparseDim, input.dense_dim(),
                                          shapeAndTypeHash(input)};
  std::vector<int64_t> all(kHeaderLength * static_cast<size_t>(size));
  allGather(mine.data(), all.data(), Elements{coilInt64, kHeaderLength}, comm);
  int64_t maxNnz = 0;
  for (int r = 0; r < size; ++r) {
    const int64_t* theirs = &all[kHeaderLength * static_cast<size_t>(r)];
    TORCH_CHECK(theirs[kSparseDim] == mine[kSparseDim] && theirs[kDenseDim] == mine[kDenseDim] &&
                    theirs[kShapeAndType] == mine[kShapeAndType],
                "coil backend: allreduce of sparse tensors: rank ", r,
                "'s tensor differs from this rank's ", input.sizes(), " ",
                dtypeName(input.scalar_type()), " with ", sparseDim,
                " sparse dims (every rank needs the same shape, dtype and sparse dims)");
    maxNnz = std::max(maxNnz, theirs[kNnz]);
  }

  // Every rank's indices and values, padded to maxNnz, end to end.
  at::Tensor paddedIndices = at::zeros({sparseDim, maxNnz}, indices.options());
  paddedIndices.narrow(1, 0, nnz).copy_(indices);
  std::vector<int64_t> valueShape = values.sizes().vec();
  valueShape[0] = maxNnz;
  at::Tensor paddedValues = at::zeros(valueShape, values.options());
  paddedValues.narrow(0, 0, nnz).copy_(values);
  at::Tensor gatheredIndices = at::empty({size, sparseDim, maxNnz}, indices.options());
  valueShape.insert(valueShape.begin(), size);
  at::Tensor gatheredValues = at::empty(valueShape, values.options());
  allGather(paddedIndices.data_ptr(), gatheredIndices.data_ptr(),
            Elements{coilInt64, static_cast<size_t>(paddedIndices.numel())}, comm);
  allGather(paddedValues.data_ptr(), gatheredValues.data_ptr(),
            movedElements(values.scalar_type(), paddedValues.numel()), comm);

  std::vector<at::Tensor> indexPieces, valuePieces;
  for (int r = 0; r < size; ++r) {
    const int64_t n = all[kHeaderLength * static_cast<size_t>(r) + kNnz];
    indexPieces.push_back(gatheredIndices[r].narrow(1, 0, n));
    valuePieces.push_back(gatheredValues[r].narrow(0, 0, n));
  }
  at::Tensor sum = at::sparse_coo_tensor(at::cat(indexPieces, 1), at::cat(valuePieces, 0),
                                         input.sizes(), input.options())
                       .coalesce();
  t.copy_(sum);
}

}  // namespace coil_torch
