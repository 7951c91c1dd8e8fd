// LinkSet: the transports of one communicator and the connection to each of
// its peers, shared with the children coilCommSplit makes with splitShare=1.
//
// Without sharing a communicator is the only user of its LinkSet, and the
// set is nothing but the owner of its transports and connections. With
// sharing, a child holds the same set (through a LinkLease) and reaches its
// peers through the parent's connections: child rank i talks over the link
// to parent rank members[i]. The set lives until its last user is gone, so
// parent and child may be destroyed in either order; only then do helper
// threads (the tcp proxy) stop and the connections close.
//
// Two rules follow from sharing one FIFO between communicators:
//  - Operations on one link never overlap: a communicator claims each of
//    its links for the length of an operation (tryClaim/release), and a
//    second communicator that finds a link claimed fails instead of mixing
//    its slots into the other's. Claims are per link, so children over
//    disjoint peers (odd/even split) run at the same time.
//  - Shared links share fate: closing a link (a communicator that broke or
//    was aborted) closes it for every user, and the others fail on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "transports/transport.h"

namespace coil {

class LinkSet {
 public:
  /// Takes the transports and the connections they made; `nranks` is the
  /// owner's size, and link i is the connection to the owner's rank i.
  LinkSet(std::vector<std::unique_ptr<transport::Transport>> transports,
          std::vector<std::unique_ptr<transport::Connection>> connections, int nranks);
  /// Stops helper threads, then frees connections and transports.
  ~LinkSet();
  LinkSet(const LinkSet&) = delete;
  LinkSet& operator=(const LinkSet&) = delete;

  /// Link slots (the owner's rank count).
  int size() const { return static_cast<int>(slots_.size()); }
  /// The connection to the owner's rank `index`; nullptr for the owner itself.
  transport::Connection* link(int index) const { return slots_[index].conn; }

  /// True once two communicators have used the set at the same time; from
  /// then on operations claim their links. (Stays true: a child that broke
  /// leaves closed links behind that the parent must notice.)
  bool everShared() const { return everShared_.load(std::memory_order_acquire); }

  /// Marks link `index` in use by communicator `user` (non-zero). Returns 0
  /// on success, else the id of the communicator holding it.
  uint64_t tryClaim(int index, uint64_t user);
  /// Ends the claim tryClaim(index, user) made.
  void release(int index, uint64_t user);

  /// Closes link `index` for every user (tells the peer this side is gone).
  /// Idempotent, thread-safe, never blocks for long.
  void close(int index) noexcept;
  /// True once close(index) was called by any user.
  bool closed(int index) const { return slots_[index].closed.load(std::memory_order_acquire); }

  /// The link across hosts as the owner measured it at init
  /// (comm/link_probe.cc), for the children that borrow the set: they adopt
  /// it instead of probing over links their parent may be using. Set once,
  /// before any child borrows the set.
  struct MeasuredLink {
    double alphaUs = 0;
    double betaUsPerB = 0;
  };
  void setMeasuredLink(const MeasuredLink& link) { measured_ = link; }
  const std::optional<MeasuredLink>& measuredLink() const { return measured_; }

 private:
  friend class LinkLease;
  void join();
  void leave();

  struct Slot {
    transport::Connection* conn = nullptr;
    std::atomic<uint64_t> holder{0};
    std::atomic<bool> closed{false};
  };

  std::vector<std::unique_ptr<transport::Transport>> transports_;
  std::vector<std::unique_ptr<transport::Connection>> connections_;
  std::vector<Slot> slots_;
  std::atomic<int> users_{0};
  std::atomic<bool> everShared_{false};
  std::optional<MeasuredLink> measured_;
};

/// One communicator's use of a LinkSet: counts as a user for its lifetime.
class LinkLease {
 public:
  LinkLease() = default;
  explicit LinkLease(std::shared_ptr<LinkSet> set);
  ~LinkLease();
  LinkLease(LinkLease&& other) noexcept;
  LinkLease& operator=(LinkLease&& other) noexcept;
  LinkLease(const LinkLease&) = delete;
  LinkLease& operator=(const LinkLease&) = delete;

  LinkSet* get() const { return set_.get(); }
  LinkSet* operator->() const { return set_.get(); }
  explicit operator bool() const { return set_ != nullptr; }
  /// Another lease on the same set.
  LinkLease share() const { return LinkLease(set_); }
  /// Stops using the set (and frees it if this was the last user).
  void reset();

 private:
  std::shared_ptr<LinkSet> set_;
};

/// What a child created with splitShare=1 borrows: the parent's set (the
/// lease is taken during the split, so the parent claims its links from
/// then on), and for each child rank the index of its link in the set (-1
/// for the child's own rank). Empty: the child makes its own connections.
struct SharedLinks {
  LinkLease lease;
  std::vector<int> linkOf;
};

}  // namespace coil
