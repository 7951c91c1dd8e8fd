#include "uneven_all_gather.h"

#include <ATen/ATen.h>

#include <c10/util/StringUtil.h>

#include <optional>

#include "coil_calls.h"
#include "cuda_op.h"
#include "tensor_args.h"

namespace coil_torch {
namespace {

void gatherPadded(const at::Tensor& mine, std::vector<at::Tensor>& outs, int64_t largest,
                  coilComm_t comm) {
  // The padding never reaches an output; zeros keep what is sent defined.
  at::Tensor block = at::zeros({largest}, mine.options());
  block.narrow(0, 0, mine.numel()).copy_(mine.reshape({-1}));
  at::Tensor gathered = at::empty({static_cast<int64_t>(outs.size()) * largest}, mine.options());
  const Elements e = movedElements(mine.scalar_type(), static_cast<size_t>(largest));
  check(coilAllGather(block.data_ptr(), gathered.data_ptr(), e.count, e.type, comm, opStream()),
        "coilAllGather");
  for (size_t r = 0; r < outs.size(); ++r)
    outs[r].copy_(gathered.narrow(0, static_cast<int64_t>(r) * largest, outs[r].numel())
                      .view(outs[r].sizes()));
}

void gatherByBroadcasts(const at::Tensor& mine, std::vector<at::Tensor>& outs, int rank,
                        coilComm_t comm) {
  // Each output is received in place when contiguous, else into a
  // row-major stand-in copied back after the group (not empty_like: it keeps
  // a transposed tensor's strides, and the bytes arrive in row-major order).
  std::vector<at::Tensor> into;
  for (const at::Tensor& o : outs)
    into.push_back(o.is_contiguous() ? o : at::empty(o.sizes(), o.options()));
  const at::Tensor source = mine.contiguous();
  CoilGroup group;
  for (size_t r = 0; r < outs.size() && !group.failed(); ++r) {
    if (into[r].numel() == 0) continue;  // every rank skips it: the sizes agree
    const Elements e = movedElements(into[r].scalar_type(), static_cast<size_t>(into[r].numel()));
    const void* send = static_cast<int>(r) == rank ? source.data_ptr() : into[r].data_ptr();
    group.add(coilBroadcast(send, into[r].data_ptr(), e.count, e.type, static_cast<int>(r), comm,
                            opStream()),
              c10::str("coilBroadcast from rank ", r));
  }
  group.end();
  for (size_t r = 0; r < outs.size(); ++r)
    if (!into[r].is_same(outs[r])) outs[r].copy_(into[r]);
}

}  // namespace

void allGatherUneven(const at::Tensor& mine, std::vector<at::Tensor>& outs, int rank,
                     coilComm_t comm) {
  if (const std::optional<int64_t> largest = paddedBlockSize(outs))  // see the header
    gatherPadded(mine, outs, *largest, comm);
  else
    gatherByBroadcasts(mine, outs, rank, comm);
}

}  // namespace coil_torch
