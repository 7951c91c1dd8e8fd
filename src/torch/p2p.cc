#include "p2p.h"

#include <c10/util/Exception.h>

#include <utility>

#include "coil_calls.h"
#include "cuda_p2p.h"

namespace coil_torch {
namespace {

// How long a shutdown waits for the goodbyes of peers (p2p_links.h).
constexpr std::chrono::milliseconds kGoodbyeGrace{500};

std::string peerText(int peer) {
  return peer == kAnySource ? std::string("any rank") : c10::str("rank ", peer);
}

}  // namespace

PointToPoint::PointToPoint(int rank, int size, const c10::intrusive_ptr<c10d::Store>& store,
                           const std::string& prefix, std::string groupName,
                           std::chrono::milliseconds timeout)
    : rank_(rank),
      size_(size),
      groupName_(std::move(groupName)),
      timeout_(timeout),
      store_(store),
      prefix_(prefix),
      mailbox_(rank) {
  sendLinks_.resize(size);
}

Connector* PointToPoint::connector() {
  // Started by this rank's first send or receive, not with the group: a
  // group that only runs collectives (most of them) costs no thread and no
  // store connection. A peer's request made earlier waits in the store.
  if (!connector_ && size_ > 1)
    connector_ = std::make_unique<Connector>(
        store_, prefix_, rank_, JobConnectors::current(),
        [this](int source, const coilUniqueId& id) { accept(source, id); });
  return connector_.get();
}

PointToPoint::~PointToPoint() { close(true); }

SendLink& PointToPoint::linkTo(int peer) {
  std::lock_guard<std::mutex> lock(linksMutex_);
  TORCH_CHECK(!closed_, "coil backend: the process group has been shut down or aborted");
  std::unique_ptr<SendLink>& link = sendLinks_[peer];
  if (!link) {
    LinkSettings settings{rank_, peer, groupName_, timeout_, &linkBroken_};
    Connector* connector = this->connector();
    link = std::make_unique<SendLink>(
        settings, [connector, peer](const coilUniqueId& id) { connector->request(peer, id); });
  }
  return *link;
}

void PointToPoint::accept(int source, const coilUniqueId& id) {
  std::lock_guard<std::mutex> lock(linksMutex_);
  if (closed_) return;
  recvLinks_.push_back(std::make_unique<RecvLink>(
      LinkSettings{rank_, source, groupName_, timeout_, &linkBroken_}, id, mailbox_));
}

void PointToPoint::send(const c10::intrusive_ptr<CoilWork>& work, const at::Tensor& tensor,
                        int peer, int64_t tag) {
  // What is sent is the tensor as it is now (a copy only if not contiguous);
  // a CUDA tensor as its stream leaves it, copied out on the side stream.
  const std::shared_ptr<CudaOp> copied = tensor.is_cuda() ? work->cudaOp() : nullptr;
  at::Tensor data;
  try {
    TORCH_CHECK(!tensor.is_cuda() || copied, "coil backend: send: a CUDA tensor's work has no op");
    data = copied ? copyToPinned(*copied, tensor) : tensor.contiguous();
  } catch (...) {
    work->complete(std::current_exception());  // a batch's latch hears of it too
    return;
  }
  const std::chrono::milliseconds limit = timeout_;
  work->setWaitLimit(limit, [peer, tag, limit] {
    return backendError(c10::str("coil backend: send to rank ", peer, " with tag ", tag,
                            ": Timed out after ", limit.count(),
                            " ms waiting for the peer to take the message"));
  });
  if (peer == rank_) {
    if (copied && !waitForCopy(*copied, limit)) {
      work->complete(backendError(c10::str("coil backend: send to itself: Timed out after ",
                                           limit.count(), " ms waiting for the GPU to copy the "
                                           "CUDA tensor out")));
      return;
    }
    mailbox_.deliverFromSelf(tag, data.data_ptr(),
                             static_cast<size_t>(data.numel() * data.element_size()));
    work->complete(nullptr);
    return;
  }
  linkTo(peer).push(work, std::move(data), tag, copied);
}

void PointToPoint::recv(const c10::intrusive_ptr<CoilWork>& work, const at::Tensor& tensor,
                        int source, int64_t tag) {
  // A CUDA tensor's message lands in pinned memory first; what the mailbox
  // holds is then a receive of that, which completes `work` (cuda_p2p.h).
  c10::intrusive_ptr<CoilWork> posted = work;
  at::Tensor into = tensor;
  if (tensor.is_cuda()) {
    try {
      TORCH_CHECK(work->cudaOp(), "coil backend: recv: a CUDA tensor's work has no op");
      posted = receiveThroughPinned(rank_, work, work->cudaOp(), tensor, &into);
    } catch (...) {
      work->complete(std::current_exception());
      return;
    }
  }
  const std::chrono::milliseconds limit = timeout_;
  Mailbox* mailbox = &mailbox_;
  const CoilWork* raw = posted.get();
  CoilWork* waited = work.get();
  work->setWaitLimit(limit, [mailbox, raw, waited, source, tag, limit]() -> std::exception_ptr {
    if (!mailbox->withdraw(raw)) return nullptr;  // its message is arriving
    std::exception_ptr error = backendError(
        c10::str("coil backend: recv from ", peerText(source), " with tag ", tag,
                 ": Timed out after ", limit.count(), " ms waiting for the message"));
    waited->complete(error);
    return error;
  });
  {
    std::lock_guard<std::mutex> lock(linksMutex_);
    TORCH_CHECK(!closed_, "coil backend: the process group has been shut down or aborted");
    connector();  // the senders' requests can be answered from now on
  }
  mailbox_.post(std::move(posted), into, source, tag);
}

void PointToPoint::close(bool drain) {
  std::vector<std::unique_ptr<SendLink>> sendLinks;
  std::vector<std::unique_ptr<RecvLink>> recvLinks;
  {
    std::lock_guard<std::mutex> lock(linksMutex_);
    if (closed_) return;
    closed_ = true;
    sendLinks.swap(sendLinks_);
  }
  for (auto& link : sendLinks)
    if (link) link->close(drain);
  // No link is accepted after this (closed_ is set). After a broken link
  // (most likely a dead peer, whose connector never stops) nobody is waited for.
  const bool waitForPeers = drain && !linkBroken_.load();
  if (connector_) connector_->stop(waitForPeers ? kConnectorsGrace : std::chrono::milliseconds(0));
  {
    std::lock_guard<std::mutex> lock(linksMutex_);
    recvLinks.swap(recvLinks_);
  }
  // Peers shutting down too say goodbye within moments; one that is not
  // gets its link revoked after this grace.
  const auto graceUntil =
      std::chrono::steady_clock::now() + (drain ? kGoodbyeGrace : std::chrono::milliseconds(0));
  for (auto& link : recvLinks) link->close(graceUntil);
  mailbox_.close(backendError(c10::str("coil backend: recv: the process group was ",
                                  drain ? "shut down" : "aborted", " before the message came")));
}

}  // namespace coil_torch
