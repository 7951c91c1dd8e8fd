// Point-to-point for the coil backend: tags, and sends and receives that
// progress together.
//
// coil's sends and receives between two ranks match in order, without tags,
// and a lone coilSend of a large buffer returns only once the peer receives
// it. So the backend does not run isend/irecv as they reach the worker: it
// posts them here, and runs everything posted as one coil group when it must
// (a wait on, or a look at, one of them; any other operation; the batch of
// batch_isend_irecv; shutdown). Then a rank's pending sends and receives
// progress together: isend then irecv of one large tensor on both ranks
// completes, in any order, at any size.
//
// Each message is a 16-byte header (tag, byte count) followed by the payload,
// both as bytes. A receive takes the peer's next message with the receive's
// own size (coil refuses a message of another size: an error, never
// truncated data) and reads its tag; a message for another tag waits (a
// copy) for the first receive of that tag from that peer. So messages match
// on (source, tag), in order within a tag, as gloo's do, when messages
// received out of order have equal sizes; otherwise the receive fails with
// both sizes.
//
// Known limits, where gloo (whose operations each progress alone) does
// better:
//  - a run takes everything pending, so a wait on one operation (or the next
//    collective) also waits for this rank's other pending sends and
//    receives, such as an irecv posted early whose message comes later;
//  - a run's sends complete only when the peer takes them: messages larger
//    than coil's fifo that the peer takes in a later run than the one that
//    takes the message it is waiting for (tags received out of order, one
//    wait at a time, on both ranks at once) wait until the timeout;
//  - messages received out of order by tag must have equal sizes (a
//    receive takes the next message with its own size before it can read
//    the tag); otherwise the receive fails naming both sizes, and the
//    communicator is broken.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "coil_calls.h"
#include "work_queue.h"

namespace coil_torch {

class PointToPoint {
 public:
  PointToPoint(int rank, int size, CommRef comm) : rank_(rank), comm_(std::move(comm)) {
    recvs_.resize(size);
  }

  /// Adds a send or receive, to run at the next flush(). A receive that an
  /// earlier message (held back, or sent to self) matches completes at once.
  /// Worker thread only.
  void post(c10::intrusive_ptr<CoilWork> work, bool isSend, const at::Tensor& tensor, int peer,
            int64_t tag);

  /// Runs every posted operation to completion (their works complete), as
  /// coil groups. On failure every pending work completes with the error,
  /// which is also returned (null on success). Worker thread only.
  std::exception_ptr flush() noexcept;

  /// Completes every pending work with `error` and forgets them.
  void failAll(std::exception_ptr error) noexcept;

 private:
  struct Op {
    c10::intrusive_ptr<CoilWork> work;
    at::Tensor tensor;
    int peer = -1;
    int64_t tag = 0;
    size_t bytes = 0;
    std::unique_ptr<Staged> staged;
    int64_t header[2] = {0, 0};  // tag, bytes: sent, or received into
  };

  /// Delivers `bytes` of a message to `op` (a receive): copies and completes
  /// it, or fails it when the sizes differ.
  static void deliver(Op& op, const void* data, size_t bytes, int peer);
  void runRound();

  int rank_;
  CommRef comm_;
  std::vector<Op> sends_;                  // posted, not yet run
  std::vector<std::deque<Op>> recvs_;      // per source: posted, unmatched, in order
  std::map<std::pair<int, int64_t>, std::deque<std::vector<uint8_t>>> early_;  // (src, tag)
};

}  // namespace coil_torch
