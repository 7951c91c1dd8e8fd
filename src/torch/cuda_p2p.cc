#include "cuda_p2p.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

namespace coil_torch {
namespace {

// Contiguous, page-locked (torch's caching host allocator): the device
// copies to and from it run asynchronously, and the allocator keeps a block
// until the copies that used it have run.
at::Tensor pinnedLike(const at::Tensor& tensor) {
  return at::empty(tensor.sizes(),
                   tensor.options().device(at::kCPU).pinned_memory(true).memory_format(
                       at::MemoryFormat::Contiguous));
}

}  // namespace

at::Tensor copyToPinned(CudaOp& op, const at::Tensor& tensor) {
  at::Tensor pinned = pinnedLike(tensor);
  op.run([&] { pinned.copy_(tensor, /*non_blocking=*/true); }, {tensor});
  return pinned;
}

bool waitForCopy(const CudaOp& op, std::chrono::milliseconds limit,
                 const std::atomic<bool>* stop) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto pause = std::chrono::microseconds(10);
  while (!op.finished()) {
    if ((stop && stop->load()) || std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  return true;
}

c10::intrusive_ptr<CoilWork> receiveThroughPinned(int rank,
                                                  const c10::intrusive_ptr<CoilWork>& work,
                                                  std::shared_ptr<CudaOp> op,
                                                  const at::Tensor& tensor, at::Tensor* pinned) {
  *pinned = pinnedLike(tensor);
  auto posted = c10::make_intrusive<CoilWork>(rank, work->retrieveOpType(),
                                              work->getSequencenumber(),
                                              std::vector<at::Tensor>{*pinned}, nullptr, nullptr);
  // Runs on the thread that completes `posted`: the link's that received
  // the message, or the caller's when it was already here. `posted` owns
  // this function, so its pointer stays valid in it.
  CoilWork* raw = posted.get();
  posted->setOnComplete([raw, work, op = std::move(op), tensor, host = *pinned](
                            std::exception_ptr error) mutable {
    if (!error) {
      try {
        op->run([&] { tensor.copy_(host, /*non_blocking=*/true); }, {tensor});
        work->setSourceRank(raw->sourceRank());
      } catch (...) {
        error = std::current_exception();
      }
    }
    work->complete(error);
  });
  return posted;
}

}  // namespace coil_torch
