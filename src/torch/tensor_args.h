// How torch tensors and reduce ops become coil arguments.
//
// Everything here runs on the calling (Python) thread before an operation is
// queued, so a bad argument raises a RuntimeError at the call site instead of
// failing later inside Work::wait().
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "coil.h"

namespace coil_torch {

/// coil's element type for `type`, or false when coil has none
/// (bool maps to coilUint8: a byte holding 0 or 1).
bool coilTypeOf(at::ScalarType type, coilDataType_t* out);

/// Element type and count for moving a tensor's bytes unchanged
/// (broadcast, gathers, all-to-all, send/recv): coil's own type where it has
/// one, else the bytes as coilUint8, so every dtype can be moved.
struct Elements {
  coilDataType_t type;
  size_t count;
};
/// Elements of `numel` values of `type` in the representation above.
Elements movedElements(at::ScalarType type, size_t numel);

/// A reduction as coil runs it: the element type, the operator, and for
/// PREMUL_SUM the factor (read on the worker thread, when the call runs).
struct Reduction {
  coilDataType_t type;
  coilRedOp_t op;
  bool preMulSum = false;
  double factor = 0.0;       ///< PREMUL_SUM with a number
  at::Tensor factorTensor;   ///< PREMUL_SUM with a one-element CPU tensor
};

/// Maps (dtype, ReduceOp) to coil. Throws c10::Error naming the dtype or the
/// op (and `opName`) when coil cannot compute it. Booleans reduce as bytes:
/// SUM and MAX are logical OR (coilMax), PRODUCT and MIN logical AND (coilMin),
/// BOR = MAX, BAND = MIN.
Reduction reductionFor(at::ScalarType type, const c10d::ReduceOp& op, const char* opName);

/// The tensor a reduction runs on. A complex tensor becomes its pairs of
/// reals (at::view_as_real: the same memory, twice the elements), which is
/// exact for the ops that act on each part alone: SUM, AVG and PREMUL_SUM
/// with a real factor, the ones gloo reduces complex tensors with. Any
/// other op on a complex tensor throws naming it. Other tensors come back
/// as they are.
at::Tensor reducible(const at::Tensor& t, const c10d::ReduceOp& op, const char* opName);
std::vector<at::Tensor> reducible(const std::vector<at::Tensor>& ts, const c10d::ReduceOp& op,
                                  const char* opName);

/// Whether CUDA tensors are accepted: yes unless COIL_TORCH_CUDA=0. (Opt-in
/// until tests/torch/test_cuda.py passed on an H100, 2026-11-26 and twice on
/// 11-27; earlier runs crashed, then hung: docs/architecture.md, the adapter.)
bool cudaTensorsEnabled();

/// Throws c10::Error unless `t` is a dense, strided CPU tensor, or a CUDA
/// tensor with cudaTensorsEnabled().
void checkDenseTensor(const at::Tensor& t, const char* opName);

/// checkDenseTensor on each, and all of `type` and `numel` (numel < 0: any).
/// (That an operation's tensors share one device, CoilBackend::enqueue checks.)
void checkSameKind(const std::vector<at::Tensor>& ts, at::ScalarType type, int64_t numel,
                   const char* opName, const char* what);

/// At least one tensor, and checkSameKind with the first one's dtype and numel.
void checkLikeFirst(const std::vector<at::Tensor>& ts, const char* opName, const char* what);

/// Throws c10::Error unless 0 <= rank < size.
void checkRank(int64_t rank, int size, const char* opName, const char* what);

/// A tensor as coil sees it: the user's tensor when it is contiguous, else a
/// contiguous copy whose contents are copied back by writeBack(). Made on the
/// worker thread, when the operation runs, so it reads the values of then.
class Staged {
 public:
  explicit Staged(const at::Tensor& user);
  void* data() const { return buffer_.data_ptr(); }
  const at::Tensor& buffer() const { return buffer_; }
  /// Copies the buffer into the user's tensor if they are different memory.
  void writeBack();

 private:
  at::Tensor user_;
  at::Tensor buffer_;
};

/// The largest numel of `ts` when padding every tensor to it moves at most
/// twice their total (n * largest <= 2 * total), else nullopt: how
/// reduce_scatter and all_gather of different sizes choose one padded coil
/// call (uneven_reduce_scatter.h, uneven_all_gather.h). Every rank gets the
/// same answer from the same sizes, so all make the same coil calls.
std::optional<int64_t> paddedBlockSize(const std::vector<at::Tensor>& ts);

/// The tensors laid end to end in one new contiguous 1-D tensor.
at::Tensor flattenInto(const std::vector<at::Tensor>& ts);
/// Copies consecutive pieces of `flat` back into `ts` (the inverse of flattenInto).
void unflattenFrom(const at::Tensor& flat, std::vector<at::Tensor>& ts);

/// The name of a dtype as torch prints it ("torch.float32").
std::string dtypeName(at::ScalarType type);

}  // namespace coil_torch
