// Matching of point-to-point messages to receives, as gloo and MPI match:
// by (source, tag), in order within a (source, tag), and a receive from any
// source takes the earliest message with its tag.
//
// Messages are pushed at the receiver (p2p_links.h): a rank's link from each
// peer always reads the next message header and then asks the mailbox where
// the payload goes: into the earliest posted receive that matches, or into a
// new buffer kept as an unexpected message until a receive claims it. So a
// send completes whether or not its receive is posted yet (eager delivery,
// bounded only by memory), and a rank's sends and receives never wait for one
// another.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <exception>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor_args.h"
#include "work_queue.h"

namespace coil_torch {

constexpr int kAnySource = -1;

class Mailbox {
 public:
  struct Kept;

  /// A message's bytes, not zeroed first (they are about to be received).
  struct Bytes {
    std::unique_ptr<uint8_t[]> data;
    size_t size = 0;
    explicit Bytes(size_t n = 0)
        : data(n ? std::make_unique_for_overwrite<uint8_t[]>(n) : nullptr), size(n) {}
  };

  /// Where a link puts the payload of a message that just announced itself:
  /// data() has room for `bytes`.
  struct Claim {
    int source = -1;
    int64_t tag = 0;
    size_t bytes = 0;
    c10::intrusive_ptr<CoilWork> work;  // the receive it completes, or null
    at::Tensor tensor;                  // that receive's tensor
    std::unique_ptr<Staged> staged;     // and its buffer, when sizes agree
    Bytes spare;                        // a receive's size differs: taken here
    Kept* kept = nullptr;               // no receive yet: the message waits here
    void* data();
  };

  /// An unexpected message. Kept from its header on, so a receive posted
  /// while its payload is still arriving takes it, in order, once complete.
  struct Kept {
    int source;
    int64_t tag;
    Bytes bytes;
    bool arriving = true;
    c10::intrusive_ptr<CoilWork> waiter;  // a receive that took it while arriving
    at::Tensor waiterTensor;
  };

  explicit Mailbox(int rank) : rank_(rank) {}

  /// A receive of `tensor` from `source` (or kAnySource) with `tag`: served
  /// at once by the earliest unexpected message that matches, else kept.
  /// Any thread.
  void post(c10::intrusive_ptr<CoilWork> work, const at::Tensor& tensor, int source, int64_t tag);

  /// A message of `bytes` from `source` with `tag` arrived: claims the
  /// earliest posted receive that matches. Link thread.
  Claim claim(int source, int64_t tag, size_t bytes);
  /// The claimed payload is in place: completes the receive (or fails it
  /// when its size differs), or keeps the message as unexpected.
  void deliver(Claim claim);
  /// The claimed payload never came (the link broke): its receive fails.
  void abandon(Claim claim, std::exception_ptr error);

  /// A message sent to this rank itself: claimed and delivered at once.
  void deliverFromSelf(int64_t tag, const void* data, size_t bytes);

  /// Receives from `source` (not from any source) fail with `error`: its
  /// link broke. Later ones too, unless an unexpected message serves them.
  void failSource(int source, std::exception_ptr error);

  /// Takes `work` back if it is still waiting for a message; true if it was.
  bool withdraw(const CoilWork* work);

  /// Every waiting receive fails with `error`, and so does every later one.
  void close(std::exception_ptr error);

 private:
  struct Posted {
    c10::intrusive_ptr<CoilWork> work;
    at::Tensor tensor;
    int source;
    int64_t tag;
  };
  /// Copies a message into a receive's tensor and completes it (or fails it
  /// when the sizes differ).
  static void fill(const c10::intrusive_ptr<CoilWork>& work, const at::Tensor& tensor, int source,
                   int64_t tag, const void* data, size_t bytes);
  /// The first posted receive that a message from `source` with `tag` matches.
  std::list<Posted>::iterator findPosted(int source, int64_t tag);
  std::exception_ptr brokenError(int source) const;

  const int rank_;
  std::mutex mutex_;
  std::list<Posted> posted_;  // in the order they were posted
  std::list<Kept> kept_;      // unexpected messages, in arrival order
  std::vector<std::pair<int, std::exception_ptr>> brokenSources_;
  std::exception_ptr closed_;
};

}  // namespace coil_torch
