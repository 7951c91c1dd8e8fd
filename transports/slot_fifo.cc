#include "transports/slot_fifo.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace coil::transport {

void FifoControl::init(uint32_t count, uint32_t bytes) {
  tail.store(0);
  tailWaiters.store(0);
  head.store(0);
  headWaiters.store(0);
  producerClosed.store(0);
  consumerClosed.store(0);
  producerPid = 0;
  consumerPid = 0;
  slotCount = count;
  slotBytes = bytes;
  std::memset(headers, 0, sizeof headers);
}

bool processGone(int32_t pid) {
  if (pid <= 0 || pid == getpid()) return false;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  // A killed process that its parent has not reaped yet is a zombie: it
  // still has a pid, but it will never touch the FIFO again.
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return false;  // no procfs (or a race with the exit): keep waiting
  char buf[256];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');  // the name may contain spaces
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

namespace {

// A throwing helper would tie this file to coil::Error; instead a small
// exception-free protocol: the lambdas record the failure and we return.
struct WaitAbandoned {
  WaitFailure why;
};

}  // namespace

void* SlotFifo::tryAcquire() {
  uint32_t t = ctl_->tail.load(std::memory_order_relaxed);
  uint32_t h = ctl_->head.load(std::memory_order_acquire);
  if (t - h >= ctl_->slotCount) return nullptr;
  return data_ + static_cast<size_t>(t % ctl_->slotCount) * ctl_->slotBytes;
}

void SlotFifo::publish(uint32_t bytes, uint64_t tag) {
  uint32_t t = ctl_->tail.load(std::memory_order_relaxed);
  SlotHeader& hdr = ctl_->headers[t % ctl_->slotCount];
  hdr.bytes = bytes;
  hdr.tag = tag;
  ctl_->tail.store(t + 1, std::memory_order_seq_cst);
  if (ctl_->tailWaiters.load(std::memory_order_seq_cst) != 0) futexWakeAll(&ctl_->tail);
}

bool SlotFifo::tryPeek(RecvSlot* out) { return tryPeekAt(0, out); }

bool SlotFifo::tryPeekAt(uint32_t index, RecvSlot* out) const {
  uint32_t h = ctl_->head.load(std::memory_order_relaxed);
  uint32_t t = ctl_->tail.load(std::memory_order_acquire);
  if (t - h <= index) return false;
  uint32_t idx = (h + index) % ctl_->slotCount;
  out->data = data_ + static_cast<size_t>(idx) * ctl_->slotBytes;
  out->bytes = ctl_->headers[idx].bytes;
  out->tag = ctl_->headers[idx].tag;
  return true;
}

void SlotFifo::release() {
  uint32_t h = ctl_->head.load(std::memory_order_relaxed);
  ctl_->head.store(h + 1, std::memory_order_seq_cst);
  if (ctl_->headWaiters.load(std::memory_order_seq_cst) != 0) futexWakeAll(&ctl_->head);
}

uint32_t SlotFifo::pending() const {
  return ctl_->tail.load(std::memory_order_acquire) - ctl_->head.load(std::memory_order_acquire);
}

void* SlotFifo::acquire(const WaitWatch& watch, WaitFailure* why) {
  void* slot = tryAcquire();
  if (slot) return slot;
  try {
    waitUntil(
        ctl_->head, ctl_->headWaiters, [&] { return (slot = tryAcquire()) != nullptr; },
        [&] {
          if (watch.abortFlag && watch.abortFlag->load(std::memory_order_relaxed))
            throw WaitAbandoned{WaitFailure::Aborted};
          watch.checkStall();
          if (auto gone = consumerGone()) throw WaitAbandoned{*gone};
        },
        watch.deadline, [] { throw WaitAbandoned{WaitFailure::Timeout}; }, watch.pollUs);
  } catch (const WaitAbandoned& w) {
    *why = w.why;
    return nullptr;
  }
  return slot;
}

bool SlotFifo::peek(RecvSlot* out, const WaitWatch& watch, WaitFailure* why) {
  if (tryPeek(out)) return true;
  try {
    waitUntil(
        ctl_->tail, ctl_->tailWaiters, [&] { return tryPeek(out); },
        [&] {
          if (watch.abortFlag && watch.abortFlag->load(std::memory_order_relaxed))
            throw WaitAbandoned{WaitFailure::Aborted};
          watch.checkStall();
          // Data published before the close is still delivered: look again
          // after seeing the flag or the exit (the producer may have
          // published, closed and exited since the last look).
          if (auto gone = producerGone(); gone && !tryPeek(out)) throw WaitAbandoned{*gone};
        },
        watch.deadline, [] { throw WaitAbandoned{WaitFailure::Timeout}; }, watch.pollUs);
  } catch (const WaitAbandoned& w) {
    *why = w.why;
    return false;
  }
  return true;
}

std::optional<WaitFailure> SlotFifo::consumerGone() const {
  if (ctl_->consumerClosed.load()) return WaitFailure::PeerClosed;
  if (processGone(ctl_->consumerPid)) return WaitFailure::PeerDied;
  return std::nullopt;
}

std::optional<WaitFailure> SlotFifo::producerGone() const {
  if (ctl_->producerClosed.load()) return WaitFailure::PeerClosed;
  if (processGone(ctl_->producerPid)) return WaitFailure::PeerDied;
  return std::nullopt;
}

void SlotFifo::closeProducer() {
  ctl_->producerClosed.store(1, std::memory_order_seq_cst);
  futexWakeAll(&ctl_->tail);
  futexWakeAll(&ctl_->head);
}

void SlotFifo::closeConsumer() {
  ctl_->consumerClosed.store(1, std::memory_order_seq_cst);
  futexWakeAll(&ctl_->tail);
  futexWakeAll(&ctl_->head);
}

}  // namespace coil::transport
