// CUDA tensors in point-to-point: send, recv, recv from any source and
// their batches. The links (p2p_links.h) move host bytes, so a CUDA message
// goes through pinned host memory at both ends, in the order of the streams
// as ProcessGroupNCCL keeps it (cuda_op.h):
//
//   send    at the call, the p2p side stream waits for the current stream
//           and copies the tensor into a pinned buffer; the caller returns.
//           The link's thread waits on the host for that copy, then sends
//           the buffer.
//   recv    a pinned buffer is posted to the mailbox (mailbox.h) in the
//           tensor's place. When the message is in it, the side stream,
//           after the current stream as it was at the call, copies it into
//           the tensor.
//   wait()  the host waits as for CPU tensors (a send until the peer has
//           the message, a receive until it came); then the current stream
//           waits for the side stream's copy.
//
// The side stream is the point-to-point's own, one per device
// (PointToPoint::sideStream), as NCCL keeps p2p apart from collectives: a
// receive's copy does not queue behind a collective issued before it, which
// may wait a long time for its peers.
//
// Cost, against NCCL's copies between the GPUs: a copy to the host and one
// back per message, and a message that is one host transfer. It is what
// pipeline-parallel training on one GPU per rank, or across hosts without
// GPUDirect, needs to run at all; the bytes per second are the host link's.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <chrono>
#include <memory>

#include "cuda_op.h"
#include "work_queue.h"

namespace coil_torch {

/// A send of CUDA `tensor`: queues its copy into pinned host memory on
/// `op`'s side stream (after the current stream as it was at the call) and
/// returns that memory. It holds the message once waitForCopy(op) is true.
at::Tensor copyToPinned(CudaOp& op, const at::Tensor& tensor);

/// Waits on the host until `op`'s copy has run: true; false once `limit`
/// has passed, or `stop` (if given) is set. Polled, so that it has a
/// deadline: the copy comes after the caller's stream, which may be waiting
/// for anything.
bool waitForCopy(const CudaOp& op, std::chrono::milliseconds limit,
                 const std::atomic<bool>* stop = nullptr);

/// A receive into CUDA `tensor` for `work` (a CUDA work whose op is `op`):
/// returns the receive to post to the mailbox in its place, into `*pinned`.
/// When that one completes, the copy into `tensor` is queued on the side
/// stream and `work` completes with the message's source, or its error.
c10::intrusive_ptr<CoilWork> receiveThroughPinned(int rank,
                                                  const c10::intrusive_ptr<CoilWork>& work,
                                                  std::shared_ptr<CudaOp> op,
                                                  const at::Tensor& tensor, at::Tensor* pinned);

}  // namespace coil_torch
