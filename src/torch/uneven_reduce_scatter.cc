#include "uneven_reduce_scatter.h"

#include <ATen/ATen.h>

#include <optional>

#include "coil_calls.h"
#include "cuda_op.h"
#include "tensor_args.h"

namespace coil_torch {

void reduceScatterUneven(const at::Tensor& out, const std::vector<at::Tensor>& blocks, int rank,
                         coilDataType_t type, coilRedOp_t op, coilComm_t comm) {
  const at::Tensor mine = [&] {
    if (const std::optional<int64_t> largest = paddedBlockSize(blocks)) {  // see the header
      // The padding's values never reach an output: each element is reduced
      // on its own.
      const int64_t m = *largest;
      at::Tensor padded = at::zeros({static_cast<int64_t>(blocks.size()) * m}, out.options());
      for (size_t i = 0; i < blocks.size(); ++i)
        padded.narrow(0, static_cast<int64_t>(i) * m, blocks[i].numel())
            .copy_(blocks[i].reshape({-1}));
      at::Tensor result = at::empty({m}, out.options());
      check(coilReduceScatter(padded.data_ptr(), result.data_ptr(), static_cast<size_t>(m), type,
                              op, comm, opStream()),
            "coilReduceScatter");
      return result.narrow(0, 0, blocks[rank].numel());
    }
    at::Tensor all = flattenInto(blocks);
    check(coilAllReduce(all.data_ptr(), all.data_ptr(), static_cast<size_t>(all.numel()), type, op,
                        comm, opStream()),
          "coilAllReduce");
    int64_t offset = 0;
    for (int r = 0; r < rank; ++r) offset += blocks[r].numel();
    return all.narrow(0, offset, blocks[rank].numel());
  }();
  out.copy_(mine.view(out.sizes()));
}

}  // namespace coil_torch
