#include "uneven_reduce_scatter.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "coil_calls.h"
#include "cuda_op.h"
#include "tensor_args.h"

namespace coil_torch {

void reduceScatterUneven(const at::Tensor& out, const std::vector<at::Tensor>& blocks, int rank,
                         coilDataType_t type, coilRedOp_t op, coilComm_t comm) {
  std::vector<int64_t> numels;
  for (const at::Tensor& b : blocks) numels.push_back(b.numel());
  const int64_t largest = *std::max_element(numels.begin(), numels.end());
  const int64_t total = std::accumulate(numels.begin(), numels.end(), int64_t{0});
  const at::Tensor mine = [&] {
    if (static_cast<int64_t>(numels.size()) * largest <= 2 * total) {  // padded (see the header)
      // The padding's values never reach an output: each element is reduced
      // on its own.
      at::Tensor padded = at::zeros({static_cast<int64_t>(blocks.size()) * largest}, out.options());
      for (size_t i = 0; i < blocks.size(); ++i)
        padded.narrow(0, static_cast<int64_t>(i) * largest, numels[i]).copy_(blocks[i].reshape({-1}));
      at::Tensor result = at::empty({largest}, out.options());
      check(coilReduceScatter(padded.data_ptr(), result.data_ptr(), static_cast<size_t>(largest),
                              type, op, comm, opStream()),
            "coilReduceScatter");
      return result.narrow(0, 0, numels[rank]);
    }
    at::Tensor all = flattenInto(blocks);
    check(coilAllReduce(all.data_ptr(), all.data_ptr(), static_cast<size_t>(all.numel()), type, op,
                        comm, opStream()),
          "coilAllReduce");
    const int64_t offset = std::accumulate(numels.begin(), numels.begin() + rank, int64_t{0});
    return all.narrow(0, offset, numels[rank]);
  }();
  out.copy_(mine.view(out.sizes()));
}

}  // namespace coil_torch
