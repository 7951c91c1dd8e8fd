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
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/call.h"
#include "algorithms/caller_io_wait.h"
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

  /// `peers[r]` connects to rank r (nullptr for self); each has a CallerIo
  /// carrying call.chunkElems elements. spinUs and yield: CallerIoWait's.
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
  CallerIoWait wait_;
  const size_t esize_;
  const size_t pieceElems_;
  const int nranks_;
  reduce::ReduceFn reduceFn_;
  reduce::DivideFn divideFn_;  // nullptr unless coilAvg
  std::vector<transport::CallerIo*> io_;  // by rank; nullptr for self
  std::vector<InFlight> sending_;         // by rank
  int receivingFrom_ = -1;                // the rank a receive in progress waits for
  const char* transportName_ = "";        // for a timeout's message
  std::vector<transport::CallerIo*> group_;  // the paths with something pending (waitUntil)
};

}  // namespace coil::algo
