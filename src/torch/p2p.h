// Point-to-point for the coil backend: sends and receives that progress on
// their own, matched on (source, tag) as gloo's are.
//
// coil's sends and receives between two ranks match in order, without tags,
// and a call returns only once done (a large send: once the peer takes it).
// So isend/irecv do not run on the backend's worker (behind, or in front of,
// collectives) nor in one coil group (which lasts until its slowest member
// is done): every direction between two ranks that is used gets its own
// 2-rank coil communicator and one thread on each side of it, made on first
// use (the sender hosts the rendezvous; the id goes through the group's
// c10d store). The sending side's thread sends its messages in order; the
// receiving side's thread receives while a receive from that peer is
// waiting. Nothing else shares those threads or communicators, so an
// operation waits only for the peer's matching operation (and for the
// messages from that peer ahead of it), never for unrelated work of either
// rank: isend/irecv in any order, of any size, with collectives in between,
// complete, as gloo's do.
//
// Each message is a 16-byte header (tag, byte count) followed by the payload.
// The receiving thread reads the header, then receives the payload straight
// into the first waiting receive of that tag (no copy for a contiguous
// tensor), or, when there is none, into a buffer kept for the next receive of
// that tag (a copy). Messages of one tag from one source are received in the
// order they were sent. A message whose size differs from the receive it
// matches fails that receive, naming both sizes; the stream stays in step.
//
// Deadlines: every coil call (the rendezvous, each header and payload) gives
// up after the process group's timeout and the store's get after the store's
// timeout; the error names the peer and the tag, and breaks that one
// direction (its waiting and later operations fail with it).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace coil_torch {

class PointToPoint {
 public:
  /// Called once with the outcome (null: success), on any thread.
  using Done = std::function<void(std::exception_ptr)>;

  /// `key` prefixes the store keys of the rendezvous of each direction.
  PointToPoint(int rank, int size, c10::intrusive_ptr<c10d::Store> store, std::string key,
               std::string commName, std::chrono::milliseconds timeout);
  /// As shutdown().
  ~PointToPoint();
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  /// Starts sending `tensor` to `peer` (any thread; returns at once). A
  /// contiguous tensor is read while the send runs; another is copied now.
  void send(const at::Tensor& tensor, int peer, int64_t tag, Done done);
  /// Starts receiving into `tensor` the next message from `peer` with `tag`
  /// (any thread; returns at once, having completed it when the message was
  /// already here).
  void recv(const at::Tensor& tensor, int peer, int64_t tag, Done done);

  /// Refuses new operations, lets the started ones finish (each within the
  /// deadlines above), then frees the communicators. Idempotent.
  void shutdown();
  /// Refuses new operations, fails the started ones with `error`, interrupts
  /// the coil calls in progress and frees the communicators. Idempotent.
  void abort(std::exception_ptr error);

  struct Channel;  // one direction with one peer (p2p.cc)

 private:
  /// The channel for messages to (outgoing) or from `peer`, made (and its
  /// thread started) on first use. Throws once shut down.
  std::shared_ptr<Channel> channel(int peer, bool outgoing);
  void stopAll(std::exception_ptr abortError);

  const int rank_;
  const c10::intrusive_ptr<c10d::Store> store_;
  const std::string key_;
  const std::string commName_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  bool closed_ = false;
  std::vector<std::shared_ptr<Channel>> out_, in_;  // per peer; in_[rank_]: messages to self
};

}  // namespace coil_torch
