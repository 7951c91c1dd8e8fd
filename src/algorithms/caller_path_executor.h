// CallerPathExecutor: runs a per-rank program (primitives.h) over every
// peer's caller-driven path (transport::CallerIo: tcp's express socket),
// straight from and into the caller's buffers, with no helper thread.
//
// Why. The FIFO executor hands each 128 KiB slice to tcp's proxy thread:
// the data is copied into a slot, written by the proxy, read by the peer's
// proxy into a slot, and copied out again, with two thread wake-ups per
// slot. A large tcp all-reduce on 2 cores ran at 0.56-0.66x Open MPI's tcp
// BTL, whose single thread writes each message in one writev() and reads it
// straight into the user's buffer. Here the calling thread does the same: a
// send is one message of up to a piece (the model's callerPieceBytes, at
// most the path's largest message) written from where the data lies; a
// receive lands in the output, or in a scratch piece when it is to be
// reduced. That made it 1.3-1.8x Open MPI at 2-16 MiB (docs/performance.md,
// section 4.3).
//
// Semantics (the FIFO executor's, per primitive):
//   - receives are synchronous: a primitive returns once its data arrived;
//   - sends are asynchronous, one in flight per peer: a send to a peer
//     first waits for the previous one to that peer to leave, and every
//     wait advances every pending send, so neighbours never block each
//     other on full socket buffers (a send waits only for a peer that is
//     receiving, or whose receives the kernel's buffers already hold);
//   - a primitive that writes part of the output first waits for any send
//     still reading that part, so a program may reuse its buffers as it
//     would with FIFOs;
//   - drain() waits until every send has left; the collective driver calls
//     it before the call returns (the caller may then reuse its buffers).
// Every wait is CallerIoWait's: deadline, abort flag, stall probe.
//
// Links of both kinds (shm inside each host, tcp across). The peers with no
// caller-driven path are reached through their FIFOs, slice by slice, as
// the FIFO executor does (it lends its slice steps), so a communicator over
// several hosts sends across them on the express sockets and not through
// tcp's proxy. A primitive whose links are all FIFOs is the FIFO
// executor's; one that joins the two kinds moves a piece at a time: the
// piece is then whole FIFO slices (the call's chunk, a multiple of the
// slice), so the two ends of every FIFO link cut the data alike whichever
// primitive each runs. A FIFO wait also advances the sends in flight, each
// time it wakes from a sleep slice (SendsAdvance), so a rank waiting for a
// peer on its host never holds back a message a peer across needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/call.h"
#include "algorithms/caller_io_wait.h"
#include "algorithms/fifo_executor.h"
#include "algorithms/primitives.h"
#include "reduce/reduce.h"
#include "transports/caller_io.h"
#include "transports/transport.h"

namespace coil::algo {

class CallerPathExecutor final : public Primitives {
 public:
  /// The largest piece every peer's caller-driven path carries; 0 when a
  /// peer has none (then the program runs on the FIFO executor).
  static size_t largestPiece(const std::vector<transport::Connection*>& peers);

  /// `peers[r]` connects to rank r (nullptr for self). A peer whose CallerIo
  /// carries messages carries call.chunkElems elements; the others are
  /// reached through their FIFOs (then the chunk must be whole slices).
  /// spinUs and yield: CallerIoWait's.
  CallerPathExecutor(const std::vector<transport::Connection*>& peers, const Call& call,
                     int spinUs, bool yield);

  void send(int to, size_t offset, size_t count) override;
  void recv(int from, size_t offset, size_t count) override;
  void recvReduceSend(int from, int to, size_t offset, size_t count) override;
  void recvReduceCopySend(int from, int to, size_t offset, size_t count) override;
  void recvCopySend(int from, int to, size_t offset, size_t count) override;
  void recvReduceCopy(int from, size_t offset, size_t count) override;
  void recvReduce(int from, size_t offset, size_t count) override;
  void copy(size_t inOffset, size_t outOffset, size_t count) override;
  void sendRecv(int to, size_t inOffset, int from, size_t outOffset, size_t count) override;

  /// Waits until every send has left this rank.
  void drain();

 private:
  // The bytes a send in flight reads; data == nullptr: none.
  struct InFlight {
    const uint8_t* data = nullptr;
    size_t bytes = 0;
  };

  const uint8_t* in(size_t elem) const {
    return static_cast<const uint8_t*>(call_.input) + elem * esize_;
  }
  uint8_t* out(size_t elem) const {
    return static_cast<uint8_t*>(call_.output) + (elem - call_.outputOrigin) * esize_;
  }
  template <typename Body>
  void forPieces(size_t offset, size_t count, Body&& body);

  // The FIFO waits' stall check (WaitWatch::stall) with the sends in flight
  // advanced.
  class SendsAdvance final : public transport::StallCheck {
   public:
    SendsAdvance(const CallerPathExecutor& owner, const transport::StallCheck* inner)
        : owner_(owner), inner_(inner) {}
    void check() const override;

   private:
    const CallerPathExecutor& owner_;
    const transport::StallCheck* inner_;
  };

  bool onFifo(int q) const { return io_[q] == nullptr; }
  /// Before a primitive the FIFO executor runs: no send in flight reads the
  /// `count` output elements from `offset` it writes, and the sends move on.
  void beforeFifoPrimitive(size_t offset, size_t count);
  /// Advances every send in flight once (failures throw).
  void advanceSends() const;
  /// The `n` elements from `o` arriving from FIFO peer `from`, slice by
  /// slice: take(slot, d, k) gets elements [o + d, o + d + k), in the slot.
  template <typename Take>
  void fromSlots(int from, size_t o, size_t n, Take&& take);
  /// `n` elements to FIFO peer `to`, slice by slice: fill(slot, d, k)
  /// writes elements [d, d + k) of them into the slot.
  template <typename Fill>
  void intoSlots(int to, size_t n, Fill&& fill);
  /// dst[0, n) <- in ⊕ input[o, o + n), the `n` elements arriving from `from`.
  void reduceArriving(int from, uint8_t* dst, size_t o, size_t n);
  /// output[o, o + n) <- the `n` elements arriving from `from` (the caller
  /// saw to the sends that read it: beforeWriting).
  void receiveInto(int from, size_t o, size_t n);
  /// `n` elements from `src` to `to` (in flight when `to` has a caller path).
  void sendFrom(int to, const uint8_t* src, size_t n);

  /// Starts sending [data, data + bytes) to `to` once its previous send left.
  void startSend(int to, const void* data, size_t bytes);
  /// Receives the next message from `from` into [dst, dst + bytes): it must
  /// carry this call's tag and exactly `bytes`.
  void receive(int from, void* dst, size_t bytes);
  /// output[o, o + n) <- in ⊕ input[o, o + n), the `n` elements arriving from
  /// `from`; then fin() when `finished`.
  void receiveReduced(int from, size_t o, size_t n, bool finished);
  /// Waits for the sends that read any of [p, p + bytes): it is about to be written.
  void beforeWriting(const void* p, size_t bytes);
  /// A scratch piece that no send in flight reads, other than `besides`.
  uint8_t* freeScratch(const uint8_t* besides);
  /// True while the send to `q` still reads its data.
  bool sendInFlight(int q) const { return sending_[q].data != nullptr && !io_[q]->sendComplete(); }
  void waitSendLeft(int to);
  void finish(void* data, size_t count);  // coilAvg's division
  /// Waits until `done()` holds, advancing every path with something pending.
  template <typename Done>
  void waitUntil(Done&& done);

  const Call& call_;
  Call fifoCall_;             // call_, with SendsAdvance as its stall check
  SendsAdvance sendsAdvance_;
  FifoExecutor fifo_;         // the FIFO links (fifoCall_)
  CallerIoWait wait_;
  const size_t esize_;
  const size_t pieceElems_;
  const size_t sliceElems_;  // of the FIFO links
  const int nranks_;
  reduce::ReduceFn reduceFn_;
  reduce::DivideFn divideFn_;  // nullptr unless coilAvg
  std::vector<transport::CallerIo*> io_;  // by rank; nullptr for self and the FIFO links
  std::vector<InFlight> sending_;         // by rank
  int receivingFrom_ = -1;                // the rank a receive in progress waits for
  const char* transportName_ = "";        // for a timeout's message
  std::vector<transport::CallerIo*> group_;  // the paths with something pending (waitUntil)
};

}  // namespace coil::algo
