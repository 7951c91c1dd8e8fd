#include "p2p.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <string>

namespace coil_torch {
namespace {

constexpr size_t kHeaderBytes = 2 * sizeof(int64_t);

std::exception_ptr errorWith(const std::string& message) {
  try {
    C10_THROW_ERROR(DistBackendError, message);
  } catch (...) {
    return std::current_exception();
  }
}

size_t byteCount(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

}  // namespace

void PointToPoint::deliver(Op& op, const void* data, size_t bytes, int peer) {
  if (bytes != op.bytes) {
    op.work->complete(errorWith(c10::str(
        "coil backend: recv from rank ", peer, " with tag ", op.tag, ": the message has ", bytes,
        " bytes but the receive has ", op.bytes, " bytes (", op.tensor.numel(), " x ",
        op.tensor.scalar_type(), ")")));
    return;
  }
  if (!op.staged) op.staged = std::make_unique<Staged>(op.tensor);
  if (bytes) std::memcpy(op.staged->data(), data, bytes);
  op.staged->writeBack();
  op.work->complete(nullptr);
}

void PointToPoint::post(c10::intrusive_ptr<CoilWork> work, bool isSend, const at::Tensor& tensor,
                        int peer, int64_t tag) {
  Op op;
  op.work = std::move(work);
  op.tensor = tensor;
  op.peer = peer;
  op.tag = tag;
  op.bytes = byteCount(tensor);
  if (isSend && peer == rank_) {
    // To self: no coil call; the message is delivered here.
    at::Tensor flat = tensor.contiguous();
    const auto* p = static_cast<const uint8_t*>(flat.data_ptr());
    std::deque<Op>& mine = recvs_[rank_];
    bool matched = false;
    for (auto it = mine.begin(); it != mine.end(); ++it) {
      if (it->tag != tag) continue;
      deliver(*it, p, op.bytes, rank_);
      mine.erase(it);
      matched = true;
      break;
    }
    if (!matched) early_[{rank_, tag}].emplace_back(p, p + op.bytes);
    op.work->complete(nullptr);
    return;
  }
  if (isSend) {
    sends_.push_back(std::move(op));
    return;
  }
  auto early = early_.find({peer, tag});
  if (early != early_.end() && !early->second.empty()) {
    std::vector<uint8_t> message = std::move(early->second.front());
    early->second.pop_front();
    if (early->second.empty()) early_.erase(early);
    deliver(op, message.data(), message.size(), peer);
    return;
  }
  recvs_[peer].push_back(std::move(op));
}

void PointToPoint::runRound() {
  std::vector<Transfer> transfers;
  for (Op& op : sends_) {
    op.staged = std::make_unique<Staged>(op.tensor);
    op.header[0] = op.tag;
    op.header[1] = static_cast<int64_t>(op.bytes);
    transfers.push_back(Transfer{true, op.header, Elements{coilUint8, kHeaderBytes}, op.peer});
    transfers.push_back(Transfer{true, op.staged->data(), Elements{coilUint8, op.bytes}, op.peer});
  }
  // One message from `peer` for each receive still waiting on it, each taken
  // with that receive's size.
  for (int peer = 0; peer < static_cast<int>(recvs_.size()); ++peer) {
    if (peer == rank_) continue;
    for (Op& op : recvs_[peer]) {
      if (!op.staged) op.staged = std::make_unique<Staged>(op.tensor);
      transfers.push_back(Transfer{false, op.header, Elements{coilUint8, kHeaderBytes}, peer});
      transfers.push_back(Transfer{false, op.staged->data(), Elements{coilUint8, op.bytes}, peer});
    }
  }
  if (transfers.empty()) return;
  runTransferGroup(transfers, comm_.get());

  for (Op& op : sends_) op.work->complete(nullptr);
  sends_.clear();
  for (int peer = 0; peer < static_cast<int>(recvs_.size()); ++peer) {
    if (peer == rank_ || recvs_[peer].empty()) continue;
    std::deque<Op>& ops = recvs_[peer];
    const size_t k = ops.size();
    // Message i arrived in ops[i]'s buffer; it belongs to the first receive
    // of its tag not yet served (in the order they were posted), if any.
    std::vector<int> target(k, -1);
    std::vector<bool> taken(k, false);
    for (size_t i = 0; i < k; ++i)
      for (size_t j = 0; j < k; ++j)
        if (!taken[j] && ops[j].tag == ops[i].header[0]) {
          target[i] = static_cast<int>(j);
          taken[j] = true;
          break;
        }
    // Messages that move are copied out first: their buffers may be written.
    std::vector<std::vector<uint8_t>> moved(k);
    for (size_t i = 0; i < k; ++i)
      if (target[i] != static_cast<int>(i)) {
        const auto* p = static_cast<const uint8_t*>(ops[i].staged->data());
        moved[i].assign(p, p + ops[i].bytes);
      }
    for (size_t i = 0; i < k; ++i) {
      if (target[i] == static_cast<int>(i)) {
        ops[i].staged->writeBack();
        ops[i].work->complete(nullptr);
      } else if (target[i] >= 0) {
        deliver(ops[target[i]], moved[i].data(), moved[i].size(), peer);
      } else {
        early_[{peer, ops[i].header[0]}].push_back(std::move(moved[i]));
      }
    }
    std::deque<Op> waiting;
    for (size_t j = 0; j < k; ++j)
      if (!taken[j]) waiting.push_back(std::move(ops[j]));
    ops.swap(waiting);
  }
}

std::exception_ptr PointToPoint::flush() noexcept {
  auto busy = [&] {
    if (!sends_.empty()) return true;
    for (size_t p = 0; p < recvs_.size(); ++p)
      if (static_cast<int>(p) != rank_ && !recvs_[p].empty()) return true;
    return false;
  };
  try {
    while (busy()) runRound();
    return nullptr;
  } catch (const c10::Error& e) {
    std::exception_ptr error = errorWith(c10::str(
        e.what_without_backtrace(),
        " (coil backend point-to-point: messages match by source and tag, in order within a "
        "tag; a message must have as many bytes as the receive it matches)"));
    failAll(error);
    return error;
  } catch (...) {
    std::exception_ptr error = std::current_exception();
    failAll(error);
    return error;
  }
}

void PointToPoint::failAll(std::exception_ptr error) noexcept {
  for (Op& op : sends_) op.work->complete(error);
  sends_.clear();
  for (auto& ops : recvs_) {
    for (Op& op : ops) op.work->complete(error);
    ops.clear();
  }
}

}  // namespace coil_torch
