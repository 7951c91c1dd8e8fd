#include "algorithms/fifo_executor.h"

#include "algorithms/failure_notice.h"

#include <algorithm>
#include <cstring>

#include "algorithms/fingerprint.h"
#include "core/error.h"

namespace coil::algo {

using transport::WaitFailure;

FifoExecutor::FifoExecutor(const std::vector<transport::Connection*>& peers, const Call& call)
    : peers_(peers),
      call_(call),
      watch_(call.watch),
      sliceElems_(call.sliceElems),
      esize_(call.elementBytes),
      nranks_(static_cast<int>(peers.size())),
      reduceFn_(reduce::kernel(call.type, call.reduceOp)),
      divideFn_(call.reduceOp == coilAvg ? reduce::divider(call.type) : nullptr) {}

void FifoExecutor::failWait(int peer, WaitFailure why, const char* direction) {
  switch (why) {
    case WaitFailure::Timeout:
      fail(coilTimeout, call_.description(), ": timed out after ", watch_.deadline.totalMs(),
           " ms waiting ", direction, " rank ", peer, " (", peers_[peer]->traits().name,
           "); the peer may be stuck, slower, or in a different call");
    case WaitFailure::PeerClosed:
      fail(coilRemoteError, call_.description(), ": rank ", peer, " closed its connection (",
           peers_[peer]->traits().name, ") — it failed, aborted or exited");
    case WaitFailure::PeerDied:
      fail(coilRemoteError, call_.description(), ": rank ", peer, " died (its process is gone)");
    case WaitFailure::Aborted:
      fail(coilRemoteError, call_.description(), ": communicator aborted");
  }
  fail(coilInternalError, "unknown wait failure");
}

const void* FifoExecutor::waitIncoming(int from, size_t bytes) {
  transport::RecvSlot slot;
  WaitFailure why{};
  if (!peers_[from]->recvFifo().peek(&slot, watch_, &why)) failWait(from, why, "for data from");
  if (slot.tag != call_.tag) failForeignSlot(call_.description(), from, slot, call_.tag);
  if (slot.bytes != bytes)
    fail(coilInvalidUsage, call_.description(), ": rank ", from, " sent ", slot.bytes,
         " bytes where ", bytes, " were expected: the ranks passed different counts");
  return slot.data;
}

void FifoExecutor::doneIncoming(int from) {
  peers_[from]->recvFifo().release();
  peers_[from]->kick();
}

void* FifoExecutor::waitOutgoing(int to) {
  WaitFailure why{};
  void* slot = peers_[to]->sendFifo().acquire(watch_, &why);
  if (slot == nullptr) failWait(to, why, "for buffer space at");
  return slot;
}

void FifoExecutor::publishOutgoing(int to, size_t bytes) {
  peers_[to]->sendFifo().publish(static_cast<uint32_t>(bytes), call_.tag);
  peers_[to]->kick();
}

void FifoExecutor::finish(void* data, size_t count) {
  if (divideFn_) divideFn_(data, data, count, nranks_);
}

// Each primitive walks its range slice by slice; one slice = one FIFO slot.
template <typename Body>
static void forSlices(size_t offset, size_t count, size_t sliceElems, Body&& body) {
  for (size_t done = 0; done < count; done += sliceElems)
    body(offset + done, std::min(sliceElems, count - done));
}

void FifoExecutor::send(int to, size_t offset, size_t count) {
  forSlices(offset, count, sliceElems_, [&](size_t o, size_t n) {
    void* dst = waitOutgoing(to);
    std::memcpy(dst, in(o), n * esize_);
    publishOutgoing(to, n * esize_);
  });
}

void FifoExecutor::recv(int from, size_t offset, size_t count) {
  forSlices(offset, count, sliceElems_, [&](size_t o, size_t n) {
    const void* src = waitIncoming(from, n * esize_);
    std::memcpy(out(o), src, n * esize_);
    doneIncoming(from);
  });
}

void FifoExecutor::recvReduceSend(int from, int to, size_t offset, size_t count) {
  forSlices(offset, count, sliceElems_, [&](size_t o, size_t n) {
    const void* src = waitIncoming(from, n * esize_);
    void* dst = waitOutgoing(to);
    reduceFn_(dst, src, in(o), n);  // reduce straight into the peer's slot
    doneIncoming(from);
    publishOutgoing(to, n * esize_);
  });
}

void FifoExecutor::recvReduceCopySend(int from, int to, size_t offset, size_t count) {
  forSlices(offset, count, sliceElems_, [&](size_t o, size_t n) {
    const void* src = waitIncoming(from, n * esize_);
    void* dst = waitOutgoing(to);
    // Reduce into our output (local memory, cheaper to write than the peer's
    // slot), then forward the finished bytes.
    reduceFn_(out(o), src, in(o), n);
    finish(out(o), n);
    doneIncoming(from);
    std::memcpy(dst, out(o), n * esize_);
    publishOutgoing(to, n * esize_);
  });
}

void FifoExecutor::recvCopySend(int from, int to, size_t offset, size_t count) {
  forSlices(offset, count, sliceElems_, [&](size_t o, size_t n) {
    const void* src = waitIncoming(from, n * esize_);
    void* dst = waitOutgoing(to);
    std::memcpy(dst, src, n * esize_);
    std::memcpy(out(o), src, n * esize_);
    doneIncoming(from);
    publishOutgoing(to, n * esize_);
  });
}

void FifoExecutor::recvReduceCopy(int from, size_t offset, size_t count) {
  forSlices(offset, count, sliceElems_, [&](size_t o, size_t n) {
    const void* src = waitIncoming(from, n * esize_);
    reduceFn_(out(o), src, in(o), n);
    finish(out(o), n);
    doneIncoming(from);
  });
}

void FifoExecutor::recvReduce(int from, size_t offset, size_t count) {
  forSlices(offset, count, sliceElems_, [&](size_t o, size_t n) {
    const void* src = waitIncoming(from, n * esize_);
    reduceFn_(out(o), src, in(o), n);
    doneIncoming(from);
  });
}

void FifoExecutor::copy(size_t inOffset, size_t outOffset, size_t count) {
  if (count == 0) return;
  if (in(inOffset) != out(outOffset)) std::memmove(out(outOffset), in(inOffset), count * esize_);
  finish(out(outOffset), count);
}

// Alternates one outgoing and one incoming slice, so two ranks exchanging
// more than a FIFO's worth with each other never both block on a full FIFO.
void FifoExecutor::sendRecv(int to, size_t inOffset, int from, size_t outOffset, size_t count) {
  for (size_t done = 0; done < count; done += sliceElems_) {
    size_t n = std::min(sliceElems_, count - done);
    void* dst = waitOutgoing(to);
    std::memcpy(dst, in(inOffset + done), n * esize_);
    publishOutgoing(to, n * esize_);
    const void* src = waitIncoming(from, n * esize_);
    std::memcpy(out(outOffset + done), src, n * esize_);
    doneIncoming(from);
  }
}

}  // namespace coil::algo
