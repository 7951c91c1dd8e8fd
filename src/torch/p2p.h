// Point-to-point for the coil backend, progressing apart from collectives
// and from one another, as gloo's does.
//
// send/isend, recv/irecv and recv from any source are not queued on the
// backend's worker. Each (sender, receiver) direction gets its own 2-rank
// coil communicator and a thread at each end (p2p_links.h), set up on first
// use through the store (p2p_connector.h). The receiving end reads every
// message as it comes and the Mailbox (mailbox.h) matches it to a receive by
// (source, tag), in order within a tag; a message with no receive yet waits
// in memory. So isend/irecv complete in any order, at any size and with any
// tags, and a receive from any source takes the earliest message with its tag.
//
// CUDA tensors go through pinned host memory, in their streams' order
// (cuda_p2p.h).
//
// Costs: two threads and one communicator per direction that has been
// used, plus one thread and one store connection per process group that
// has sent or received; a message that arrives before its receive is copied
// once more.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_op.h"
#include "mailbox.h"
#include "p2p_connector.h"
#include "p2p_links.h"
#include "work_queue.h"

namespace coil_torch {

class PointToPoint {
 public:
  /// `prefix`: this backend's own key prefix in `store`. `timeout`: the
  /// process group's; every wait on a send or receive gives up after it.
  PointToPoint(int rank, int size, const c10::intrusive_ptr<c10d::Store>& store,
               const std::string& prefix, std::string groupName,
               std::chrono::milliseconds timeout);
  /// As close(true).
  ~PointToPoint();

  /// Sends `tensor` to `peer` (may be this rank) with `tag`; `work`
  /// completes once the peer has the message. Caller's thread. A CUDA
  /// tensor's work carries its CudaOp (cuda_p2p.h), made on sideStream().
  void send(const c10::intrusive_ptr<CoilWork>& work, const at::Tensor& tensor, int peer,
            int64_t tag);
  /// Receives into `tensor` from `source` (or kAnySource) with `tag`;
  /// `work` completes with the data, its sourceRank() saying who sent it.
  void recv(const c10::intrusive_ptr<CoilWork>& work, const at::Tensor& tensor, int source,
            int64_t tag);

  /// drain (shutdown): queued sends go out first; abort: nothing more is
  /// sent. Then receives still waiting fail. Idempotent.
  void close(bool drain);

  /// The stream CUDA messages of `device` are copied on (cuda_p2p.h).
  c10::Stream sideStream(const c10::Device& device) { return sideStreams_.forDevice(device); }

 private:
  SendLink& linkTo(int peer);
  /// The connector, started on first use; linksMutex_ held.
  Connector* connector();
  void accept(int source, const coilUniqueId& id);

  const int rank_;
  const int size_;
  const std::string groupName_;
  const std::chrono::milliseconds timeout_;
  const c10::intrusive_ptr<c10d::Store> store_;
  const std::string prefix_;
  Mailbox mailbox_;
  SideStreams sideStreams_;
  std::mutex linksMutex_;
  bool closed_ = false;
  std::vector<std::unique_ptr<SendLink>> sendLinks_;  // by peer; made on first send
  std::vector<std::unique_ptr<RecvLink>> recvLinks_;  // as peers connect
  // Whether a link broke (the links set it; they never outlive this
  // object): a shutdown then waits for no peer's connector.
  std::atomic<bool> linkBroken_{false};
  std::unique_ptr<Connector> connector_;               // last: its thread uses the rest
};

}  // namespace coil_torch
