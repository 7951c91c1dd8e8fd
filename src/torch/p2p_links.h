// One direction of point-to-point between two ranks: a 2-rank coil
// communicator used by exactly one thread on each side (coil calls on one
// communicator must not overlap), so each direction progresses on its own.
//
//   SendLink (at the sender): a thread and a FIFO of messages for one peer.
//     It creates the communicator on the first message (as its rank 0,
//     announcing the unique id through the Connector), then sends each
//     message as a 16-byte header (tag, bytes) and the payload. A send
//     completes when the peer's RecvLink has taken it. A small message to
//     an idle, connected link goes from the caller's thread (push).
//   RecvLink (at the receiver): a thread that joins the communicator when
//     the Connector hands it the id, then reads header after header and puts
//     each payload where the Mailbox says.
//
// A SendLink that closes in an orderly way (the process group's shutdown)
// sends a goodbye header (size -1) after its last message, and a closing
// RecvLink waits a moment for it, so that peers shutting down together do
// not see each other's communicators vanish (an error, logged as one).
//
// Every wait has a deadline: joining waits up to the process group's
// timeout, a send up to the timeout; a RecvLink waits for the next header
// without one (a peer may send nothing for hours), and is stopped by a
// revoke of its communicator, or by coil when the peer dies.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "coil.h"
#include "mailbox.h"
#include "work_queue.h"

namespace coil_torch {

/// What both kinds of link need to know.
struct LinkSettings {
  int rank = 0;          // this rank in the process group
  int peer = 0;          // the other end, in the process group
  std::string name;      // the process group's name, for coil's messages
  std::chrono::milliseconds timeout{0};
  // Set when any link of the process group breaks (a peer died, a send
  // failed): its shutdown then waits for no peer (p2p.h).
  std::atomic<bool>* anyBroken = nullptr;
};

class SendLink {
 public:
  /// `announce(id)` tells the peer to join (through the store); it runs on
  /// the link's thread and may throw.
  using Announce = std::function<void(const coilUniqueId&)>;
  SendLink(LinkSettings settings, Announce announce);
  /// As close(true).
  ~SendLink();
  SendLink(const SendLink&) = delete;
  SendLink& operator=(const SendLink&) = delete;

  /// Queues a message; `work` completes once the peer has it. `data` must
  /// stay as it is until then (a contiguous tensor; the caller's snapshot).
  /// `copied`, if set, is a CUDA send's copy into `data` (cuda_p2p.h): the
  /// link waits for it before sending.
  ///
  /// A host message of at most kInlineSendBytes to a link that is connected
  /// and idle (nothing queued, nothing being sent) is sent by the calling
  /// thread before push returns, as gloo's pairs write from the caller:
  /// waking the link's thread cost a hand-off per message. It blocks only
  /// until the bytes are in the socket or slots, which the peer's RecvLink
  /// drains whatever its owner does.
  void push(c10::intrusive_ptr<CoilWork> work, at::Tensor data, int64_t tag,
            std::shared_ptr<CudaOp> copied = nullptr);
  static constexpr int64_t kInlineSendBytes = 64 * 1024;

  /// drain: sends what is queued first (each within the timeout), for a
  /// shutdown; else revokes the communicator at once (abort) and fails the
  /// queue. Joins the thread; idempotent.
  void close(bool drain);

 private:
  struct Message {
    c10::intrusive_ptr<CoilWork> work;
    at::Tensor data;
    int64_t header[2];
    std::shared_ptr<CudaOp> copied;
  };
  void loop();
  /// Sends `m` on the connected communicator and completes its work; on a
  /// failure completes it (and everything queued) with the error and
  /// returns false: the link is broken from then on.
  bool sendOne(Message& m);
  void connect();
  void sayGoodbye() noexcept;
  void failQueued(std::exception_ptr error);

  const LinkSettings settings_;
  const Announce announce_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Message> queue_;
  // A thread is using the communicator (the link's, or a caller sending
  // inline): coil calls on one communicator must not overlap.
  bool busy_ = false;
  bool closing_ = false;
  std::exception_ptr broken_;     // set once the link failed: every later send fails with it
  std::atomic<coilComm_t> comm_{nullptr};
  std::atomic<bool> connected_{false};  // comm_ has finished joining
  std::atomic<bool> revoked_{false};
  std::thread thread_;
};

class RecvLink {
 public:
  /// Starts joining the communicator of `id` made by the peer's SendLink.
  RecvLink(LinkSettings settings, coilUniqueId id, Mailbox& mailbox);
  /// As close(now): no grace.
  ~RecvLink();
  RecvLink(const RecvLink&) = delete;
  RecvLink& operator=(const RecvLink&) = delete;

  /// Stops reading and frees the communicator. Waits until `graceUntil` for
  /// the peer's goodbye (its shutdown), so that neither side sees the other
  /// vanish mid-wait; then revokes the communicator. Idempotent.
  void close(std::chrono::steady_clock::time_point graceUntil);

 private:
  void loop(coilUniqueId id);
  void finished();

  const LinkSettings settings_;
  Mailbox& mailbox_;
  std::atomic<coilComm_t> comm_{nullptr};
  std::atomic<bool> closing_{false};
  std::mutex doneMutex_;
  std::condition_variable doneCv_;
  bool done_ = false;  // the thread has left its loop
  std::thread thread_;
};

}  // namespace coil_torch
