// FifoExecutor: runs an algorithm over real transport connections.
//
// Each primitive is cut into slices of at most `sliceBytes` (one FIFO slot).
// For every slice it waits for the incoming slot and/or a free outgoing slot,
// runs one kernel (reduce, copy, or reduce straight into the outgoing slot),
// then releases/publishes. All waits go through SlotFifo with the call's
// deadline and the communicator's abort flag; failures become coil::Error
// naming the peer and the call. Everything about the call, its buffers and
// how to wait comes from the one call value (call.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/call.h"
#include "algorithms/primitives.h"
#include "coil.h"
#include "reduce/reduce.h"
#include "transports/transport.h"

namespace coil::algo {

class FifoExecutor final : public Primitives {
 public:
  /// `peers[r]` is the connection to rank r (nullptr for self). The call's
  /// slot size (sliceElems) must be the same on every rank (the communicator
  /// agrees on it at init).
  FifoExecutor(const std::vector<transport::Connection*>& peers, const Call& call);

  void send(int to, size_t offset, size_t count) override;
  void recv(int from, size_t offset, size_t count) override;
  void recvReduceSend(int from, int to, size_t offset, size_t count) override;
  void recvReduceCopySend(int from, int to, size_t offset, size_t count) override;
  void recvCopySend(int from, int to, size_t offset, size_t count) override;
  void recvReduceCopy(int from, size_t offset, size_t count) override;
  void recvReduce(int from, size_t offset, size_t count) override;
  void copy(size_t inOffset, size_t outOffset, size_t count) override;
  void sendRecv(int to, size_t inOffset, int from, size_t outOffset, size_t count) override;

  // One slice at a time, for an executor that moves some links' data
  // itself (caller_path_executor.h) and the others' through their FIFOs.
  /// Waits for the next slot from `from`; checks its size and fingerprint.
  const void* waitIncoming(int from, size_t bytes);
  /// Frees the slot waitIncoming returned.
  void doneIncoming(int from);
  /// Waits for a free slot to `to`.
  void* waitOutgoing(int to);
  /// Publishes the slot waitOutgoing returned, with `bytes` in it.
  void publishOutgoing(int to, size_t bytes);

 private:
  const uint8_t* in(size_t elem) const { return static_cast<const uint8_t*>(call_.input) + elem * esize_; }
  uint8_t* out(size_t elem) const {
    return static_cast<uint8_t*>(call_.output) + (elem - call_.outputOrigin) * esize_;
  }
  [[noreturn]] void failWait(int peer, transport::WaitFailure why, const char* direction);
  void finish(void* data, size_t count);  // coilAvg's division

  const std::vector<transport::Connection*>& peers_;
  const Call& call_;
  const transport::WaitWatch& watch_;
  size_t sliceElems_;
  size_t esize_;
  int nranks_;
  reduce::ReduceFn reduceFn_;
  reduce::DivideFn divideFn_;  // nullptr unless coilAvg
};

}  // namespace coil::algo
