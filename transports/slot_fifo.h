// SlotFifo: the memory-level contract between a collective and a transport.
//
// One FIFO carries data in one direction between two ranks. It is a ring of
// `slotCount` buffers of `slotBytes` each, plus two counters:
//
//     tail  — slots the producer has filled   (written by the producer only)
//     head  — slots the consumer has released (written by the consumer only)
//
//     producer: wait until tail - head < slotCount, write slot tail % N, tail++
//     consumer: wait until head != tail,          read  slot head % N, head++
//
// Flow control falls out of the counters. The control block and slots live in
// whatever memory both ends can reach: a shared-memory segment (shm), process
// memory filled by a proxy thread from sockets (tcp), registered memory a NIC
// writes with RDMA plus an immediate/flag (ib), or device memory opened
// through CUDA IPC handles (cuda). See docs/architecture.md.
//
// Each slot carries a header: its byte count and a tag. The tag holds the
// collective's sequence number, so a rank that receives data belonging to a
// different call (a mismatched program) fails loudly instead of reducing it.
//
// Counters are 32-bit so that waiters can sleep on them with a futex; they
// wrap, and every comparison is a wrapping subtraction. The slot index is
// counter % slotCount, which stays consistent across the 2^32 wrap only when
// slotCount is a power of two: transports must only create such FIFOs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/deadline.h"

namespace coil::transport {

inline constexpr uint32_t kMaxSlots = 16;

struct alignas(64) SlotHeader {
  uint32_t bytes;
  uint32_t reserved;
  uint64_t tag;
};

/// The control block of one FIFO. Trivially constructible: it may be placed in
/// a fresh zero-filled shared-memory segment, then init() by its owner.
/// Every field that one side writes sits on its own cache line.
struct FifoControl {
  alignas(64) std::atomic<uint32_t> tail;
  alignas(64) std::atomic<uint32_t> tailWaiters;  // consumers asleep on tail
  alignas(64) std::atomic<uint32_t> head;
  alignas(64) std::atomic<uint32_t> headWaiters;  // producers asleep on head
  alignas(64) std::atomic<uint32_t> producerClosed;
  alignas(64) std::atomic<uint32_t> consumerClosed;
  alignas(64) int32_t producerPid;  // for liveness checks across processes
  int32_t consumerPid;
  uint32_t slotCount;
  uint32_t slotBytes;
  SlotHeader headers[kMaxSlots];

  void init(uint32_t count, uint32_t bytes);
};

/// Bytes of the data area a FIFO with these parameters needs.
inline size_t fifoDataBytes(uint32_t slotCount, uint32_t slotBytes) {
  return static_cast<size_t>(slotCount) * slotBytes;
}

/// A received slot: read-only view, valid until release().
struct RecvSlot {
  const void* data;
  uint32_t bytes;
  uint64_t tag;
};

/// Why a wait failed; the caller turns it into a message naming the peer.
enum class WaitFailure { Timeout, PeerClosed, PeerDied, Aborted };

/// A check of the layer above that a wait runs each time it wakes from a
/// sleep slice (never while it spins): the communicator looks there for
/// signs that a peer is in a different call (a mismatched program), which
/// no FIFO or window wait could see by itself, and throws its own error.
class StallCheck {
 public:
  virtual void check() const = 0;

 protected:
  ~StallCheck() = default;
};

/// Everything a blocking FIFO wait watches besides the FIFO.
struct WaitWatch {
  Deadline deadline = Deadline::never();
  const std::atomic<bool>* abortFlag = nullptr;  // the communicator's
  /// Poll this long (yielding) before sleeping: the waits of one collective,
  /// whose peers work through the same slices (waitUntil's pollUs).
  int pollUs = 0;
  const StallCheck* stall = nullptr;  // may be null

  void checkStall() const {
    if (stall != nullptr) stall->check();
  }
};

/// A view of one FIFO; it does not own the memory.
class SlotFifo {
 public:
  SlotFifo() = default;
  SlotFifo(FifoControl* control, uint8_t* data) : ctl_(control), data_(data) {}

  bool valid() const { return ctl_ != nullptr; }
  uint32_t slotBytes() const { return ctl_->slotBytes; }
  uint32_t slotCount() const { return ctl_->slotCount; }
  FifoControl* control() const { return ctl_; }

  // ---- producer side ------------------------------------------------------
  /// A free slot to write (slotBytes() bytes), or nullptr if the FIFO is full.
  void* tryAcquire();
  /// Publishes the slot returned by the last tryAcquire/acquire.
  void publish(uint32_t bytes, uint64_t tag);
  /// Blocks for a free slot; returns nullptr and sets *why on failure.
  void* acquire(const WaitWatch& watch, WaitFailure* why);
  /// Producer is going away (normal close or abort): wakes the consumer.
  void closeProducer();

  // ---- consumer side ------------------------------------------------------
  /// The next filled slot, if any.
  bool tryPeek(RecvSlot* out);
  /// The filled slot `index` places behind the next one (0: the next), if
  /// there are that many: a look down the queue that consumes nothing.
  bool tryPeekAt(uint32_t index, RecvSlot* out) const;
  /// Frees the slot returned by the last peek.
  void release();
  /// Blocks for a filled slot; false and *why on failure.
  bool peek(RecvSlot* out, const WaitWatch& watch, WaitFailure* why);
  /// Consumer is going away: wakes the producer.
  void closeConsumer();

  /// Slots currently filled and not yet released (for the proxy and tests).
  uint32_t pending() const;

  /// Why the other end can no longer take part, if it cannot: the consumer
  /// (for a producer) or the producer (for a consumer) closed its end, or
  /// its process is gone. A caller that polls instead of waiting (the
  /// point-to-point driver) asks this; the waits above ask it themselves.
  std::optional<WaitFailure> consumerGone() const;
  std::optional<WaitFailure> producerGone() const;

 private:
  FifoControl* ctl_ = nullptr;
  uint8_t* data_ = nullptr;
};

/// True when process `pid` no longer exists (and is not this process).
bool processGone(int32_t pid);

}  // namespace coil::transport
