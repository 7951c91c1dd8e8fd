#include "comm/link_set.h"

#include "core/error.h"

namespace coil {

LinkSet::LinkSet(std::vector<std::unique_ptr<transport::Transport>> transports,
                 std::vector<std::unique_ptr<transport::Connection>> connections, int nranks)
    : transports_(std::move(transports)),
      connections_(std::move(connections)),
      slots_(static_cast<size_t>(nranks)) {
  for (auto& c : connections_) {
    const int peer = c->peer();
    if (peer < 0 || peer >= nranks || slots_[peer].conn != nullptr)
      fail(coilInternalError, "transport setup returned a second or invalid connection to rank ",
           peer);
    slots_[peer].conn = c.get();
  }
}

LinkSet::~LinkSet() {
  // Stop helper threads before the connections they use go away.
  for (auto& t : transports_) t->shutdown();
  connections_.clear();
  transports_.clear();
}

uint64_t LinkSet::tryClaim(int index, uint64_t user) {
  uint64_t expected = 0;
  if (slots_[index].holder.compare_exchange_strong(expected, user, std::memory_order_acquire))
    return 0;
  return expected;
}

void LinkSet::release(int index, uint64_t user) {
  uint64_t expected = user;
  slots_[index].holder.compare_exchange_strong(expected, 0, std::memory_order_release);
}

void LinkSet::close(int index) noexcept {
  Slot& s = slots_[index];
  if (s.conn == nullptr) return;
  s.closed.store(true, std::memory_order_release);
  s.conn->close();
}

void LinkSet::join() {
  if (users_.fetch_add(1, std::memory_order_acq_rel) >= 1)
    everShared_.store(true, std::memory_order_release);
}

void LinkSet::leave() { users_.fetch_sub(1, std::memory_order_acq_rel); }

LinkLease::LinkLease(std::shared_ptr<LinkSet> set) : set_(std::move(set)) {
  if (set_) set_->join();
}

LinkLease::~LinkLease() { reset(); }

LinkLease::LinkLease(LinkLease&& other) noexcept : set_(std::move(other.set_)) {}

LinkLease& LinkLease::operator=(LinkLease&& other) noexcept {
  if (this != &other) {
    reset();
    set_ = std::move(other.set_);
  }
  return *this;
}

void LinkLease::reset() {
  if (!set_) return;
  set_->leave();
  set_.reset();
}

}  // namespace coil
