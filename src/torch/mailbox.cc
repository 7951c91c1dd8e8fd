#include "mailbox.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <utility>

#include "coil_calls.h"

namespace coil_torch {
namespace {

size_t byteCount(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

bool matches(int wantedSource, int64_t wantedTag, int source, int64_t tag) {
  return wantedTag == tag && (wantedSource == kAnySource || wantedSource == source);
}

}  // namespace

void* Mailbox::Claim::data() {
  if (staged) return staged->data();
  if (kept) return kept->bytes.data.get();
  return spare.data.get();
}

void Mailbox::fill(const c10::intrusive_ptr<CoilWork>& work, const at::Tensor& tensor, int source,
                   int64_t tag, const void* data, size_t bytes) {
  if (bytes != byteCount(tensor)) {
    work->complete(backendError(c10::str(
        "coil backend: recv from rank ", source, " with tag ", tag, ": the message has ", bytes,
        " bytes but the receive has ", byteCount(tensor), " bytes (", tensor.numel(), " x ",
        dtypeName(tensor.scalar_type()), ")")));
    return;
  }
  Staged staged(tensor);
  if (bytes) std::memcpy(staged.data(), data, bytes);
  staged.writeBack();
  work->setSourceRank(source);
  work->complete(nullptr);
}

std::list<Mailbox::Posted>::iterator Mailbox::findPosted(int source, int64_t tag) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it)
    if (matches(it->source, it->tag, source, tag)) return it;
  return posted_.end();
}

std::exception_ptr Mailbox::brokenError(int source) const {
  if (closed_) return closed_;
  if (source == kAnySource) return nullptr;
  for (const auto& [s, error] : brokenSources_)
    if (s == source) return error;
  return nullptr;
}

void Mailbox::post(c10::intrusive_ptr<CoilWork> work, const at::Tensor& tensor, int source,
                   int64_t tag) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (!matches(source, tag, it->source, it->tag) || it->waiter) continue;
    if (it->arriving) {  // it is this receive's; it completes once in
      it->waiter = std::move(work);
      it->waiterTensor = tensor;
      return;
    }
    Kept message = std::move(*it);
    kept_.erase(it);
    lock.unlock();
    fill(work, tensor, message.source, message.tag, message.bytes.data.get(), message.bytes.size);
    return;
  }
  if (std::exception_ptr error = brokenError(source)) {
    lock.unlock();
    work->complete(error);
    return;
  }
  posted_.push_back(Posted{std::move(work), tensor, source, tag});
}

Mailbox::Claim Mailbox::claim(int source, int64_t tag, size_t bytes) {
  Claim c;
  c.source = source;
  c.tag = tag;
  c.bytes = bytes;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = findPosted(source, tag);
  if (it == posted_.end()) {
    kept_.push_back(Kept{source, tag, Bytes(bytes), true, {}, {}});
    c.kept = &kept_.back();
    return c;
  }
  c.work = std::move(it->work);
  c.tensor = std::move(it->tensor);
  posted_.erase(it);
  if (bytes == byteCount(c.tensor))
    c.staged = std::make_unique<Staged>(c.tensor);
  else
    c.spare = Bytes(bytes);  // taken whole, then the receive fails naming both sizes
  return c;
}

void Mailbox::deliver(Claim c) {
  if (c.work) {
    if (c.staged) {
      c.staged->writeBack();
      c.work->setSourceRank(c.source);
      c.work->complete(nullptr);
    } else {
      fill(c.work, c.tensor, c.source, c.tag, c.spare.data.get(), c.spare.size);
    }
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (&*it != c.kept) continue;
    if (!it->waiter) {
      it->arriving = false;  // now any matching receive may take it
      return;
    }
    Kept message = std::move(*it);
    kept_.erase(it);
    lock.unlock();
    fill(message.waiter, message.waiterTensor, message.source, message.tag,
         message.bytes.data.get(), message.bytes.size);
    return;
  }
}

void Mailbox::abandon(Claim c, std::exception_ptr error) {
  if (c.work) {
    c.work->complete(error);
    return;
  }
  c10::intrusive_ptr<CoilWork> waiter;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (&*it != c.kept) continue;
      waiter = std::move(it->waiter);
      kept_.erase(it);
      break;
    }
  }
  if (waiter) waiter->complete(error);
}

void Mailbox::deliverFromSelf(int64_t tag, const void* data, size_t bytes) {
  Claim c = claim(rank_, tag, bytes);
  if (bytes) std::memcpy(c.data(), data, bytes);
  deliver(std::move(c));
}

void Mailbox::failSource(int source, std::exception_ptr error) {
  std::vector<c10::intrusive_ptr<CoilWork>> failed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    brokenSources_.emplace_back(source, error);
    for (auto it = posted_.begin(); it != posted_.end();) {
      if (it->source == source) {
        failed.push_back(std::move(it->work));
        it = posted_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& work : failed) work->complete(error);
}

bool Mailbox::withdraw(const CoilWork* work) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = posted_.begin(); it != posted_.end(); ++it)
    if (it->work.get() == work) {
      posted_.erase(it);
      return true;
    }
  return false;  // matched already: its message is arriving, or it is done
}

void Mailbox::close(std::exception_ptr error) {
  std::vector<c10::intrusive_ptr<CoilWork>> failed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_) closed_ = error;
    for (Posted& p : posted_) failed.push_back(std::move(p.work));
    posted_.clear();
  }
  for (auto& work : failed) work->complete(error);
}

}  // namespace coil_torch
