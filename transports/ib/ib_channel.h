// IbChannel: both FIFOs to one peer, moved by RDMA over one RC queue pair.
//
// Memory (one page-aligned allocation, registered once):
//
//   send FIFO   control + slots     the executor produces, the proxy consumes
//   recv FIFO   control + slots     the peer's NIC fills the slots
//   wire headers, one per recv slot the peer's NIC fills them too
//
// A published send slot i goes out as two work requests on the QP:
//   RDMA WRITE            slot i's bytes  -> the peer's recv slot i
//   RDMA WRITE_WITH_IMM   its 16-byte header (inline) -> the peer's wire
//                         header i, immediate "data"
// RC delivers them in order, so the receive completion the immediate raises
// on the peer comes after both writes landed: the peer's proxy publishes
// recv slot i with that header, and the consumer sees it like any FIFO slot.
// The send slot is released when its WRITE_WITH_IMM completes locally (the
// peer's NIC acknowledged both writes).
//
// Flow control is a credit per recv slot: a sender starts with slotCount
// credits and spends one per slot; the receiver's proxy returns the slots
// its consumer released as a zero-byte WRITE_WITH_IMM "credit n". So a
// write never lands in a slot the consumer still reads.
//
// Large point-to-point messages skip the slots (direct_io.h): the receiver
// registers its buffer and writes a clear-to-send record (tag, address,
// size, key; inline WRITE_WITH_IMM "cts") into the sender's CTS ring; the
// sender registers its buffer, RDMA-writes it into the receiver's and
// follows with a zero-byte WRITE_WITH_IMM "done". At most kDirectSlots
// receives are announced and not done, so a CTS ring slot is never
// overwritten before the sender read it.
//
// Liveness: a dead peer raises no completion while this side only waits to
// receive, so each channel also keeps the TCP socket its queue pair was set
// up over; its EOF or error (the peer process is gone or closed) and any
// failed work completion or fatal QP event close both FIFOs, and every wait
// on them ends with PeerClosed.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "net/socket.h"
#include "transports/ib/ib_device.h"
#include "transports/proxy_waker.h"
#include "transports/slot_fifo.h"

namespace coil::transport::ib {

/// Everything a peer needs to reach this side of a channel: exchanged once,
/// over the authenticated setup socket.
struct QueuePairInfo {
  uint32_t magic;
  int32_t fromRank;
  int32_t toRank;
  uint32_t qpn;
  uint32_t psn;
  uint32_t slotCount;
  uint32_t slotBytes;
  uint32_t rkey;
  uint64_t recvSlots;    // address of recv slot 0
  uint64_t wireHeaders;  // address of wire header 0
  uint64_t ctsRing;      // address of CTS ring slot 0
  uint64_t directFrom;   // COIL_IB_DIRECT_BYTES (must match)
  uint8_t gid[16];
  uint16_t lid;
  uint8_t activeMtu;
  uint8_t reserved[5];
};
inline constexpr uint32_t kQueuePairMagic = 0x50514c43;  // "CLQP"

/// A slot header as it crosses the wire (SlotHeader's first 16 bytes).
struct WireHeader {
  uint32_t bytes;
  uint32_t reserved;
  uint64_t tag;
};

/// Where a receiver's buffer is: what a clear-to-send record carries.
struct ClearToSend {
  uint64_t tag;
  uint64_t address;
  uint64_t bytes;
  uint32_t rkey;
  uint32_t reserved;
};
inline constexpr uint32_t kDirectSlots = 16;

/// Queue-pair settings (COIL_IB_TIMEOUT, COIL_IB_RETRY_CNT) and FIFO shape
/// (COIL_IB_SLOTS, COIL_IB_SLOT_BYTES).
struct ChannelOptions {
  uint32_t slotCount = 8;
  uint32_t slotBytes = 512 << 10;
  int timeout = 14;   // 4.096 µs * 2^timeout per retry (14: 67 ms)
  int retryCount = 7;
  uint64_t directFrom = 512 << 10;  // COIL_IB_DIRECT_BYTES; 0 (off) is UINT64_MAX
  static ChannelOptions fromEnv();
};

class IbChannel {
 public:
  /// Creates the QP (state INIT), allocates and registers the memory and
  /// posts the receives. `index` is the channel's number in its proxy.
  IbChannel(std::shared_ptr<IbDevice> device, ibv_cq* cq, int rank, int peer, uint32_t index,
            const ChannelOptions& options, std::shared_ptr<ProxyWaker> waker);
  ~IbChannel();
  IbChannel(const IbChannel&) = delete;
  IbChannel& operator=(const IbChannel&) = delete;

  /// This side, for the peer.
  QueuePairInfo localInfo() const;
  /// Moves the QP to RTR and RTS towards `remote` (checked against this
  /// side's shape). Throws with the peer named.
  void connectTo(const QueuePairInfo& remote);
  /// Keeps the socket the QP was set up over, for liveness.
  void adoptSocket(Socket s) { socket_ = std::move(s); }
  int socketFd() const { return socket_.fd(); }

  SlotFifo& sendFifo() { return send_; }
  SlotFifo& recvFifo() { return recv_; }
  int peer() const { return peer_; }
  uint32_t qpn() const { return qp_->qp_num; }
  void kick() noexcept { waker_->kick(); }

  // ---- proxy thread only ---------------------------------------------------
  /// Posts what can go now: published send slots (while credits and queue
  /// room last), credits for released recv slots. True if it posted any.
  bool pump();
  /// One completion of this channel's QP.
  void complete(const ibv_wc& wc);
  /// The setup socket is readable or hung up: the peer is gone.
  void socketEvent();

  // ---- direct path (DirectIo, any caller thread) ----------------------------
  size_t directFromBytes() const { return options_.directFrom; }
  RegistrationCache& registrations() { return device_->registrations(); }
  uint64_t postDirectRecv(void* buffer, size_t bytes, uint64_t tag);
  uint64_t postDirectSend(const void* data, size_t bytes, uint64_t tag);
  bool directDone(uint64_t ticket);
  std::string failure() const;

  /// Closes both FIFOs and says why (first reason wins; logged as a
  /// warning unless `expected`: a peer that closes after a normal
  /// teardown). Thread-safe.
  void fail(const std::string& why, bool expected = false) noexcept;
  /// This side is going away: the peer sees the socket close.
  void close() noexcept;
  bool failed() const { return failed_.load(std::memory_order_acquire); }

 private:
  enum Kind : uint32_t { kData = 1, kCredit = 2, kRecv = 3, kCts = 4, kDirect = 5 };
  // An immediate's top two bits say what it is; the rest, how much.
  static constexpr uint32_t kImmKindMask = 3u << 30;
  static constexpr uint32_t kImmData = 0, kImmCts = 1u << 30, kImmCredit = 2u << 30,
                            kImmDone = 3u << 30;

  struct DirectOp {
    enum State { kQueued, kPosted, kDone };
    uint64_t ticket;
    void* buffer;
    size_t bytes;
    uint64_t tag;
    ibv_mr* mr;
    bool ownsMr;  // registered for this message (else the application's)
    State state;
  };
  uint64_t postDirect(bool isSend, void* buffer, size_t bytes, uint64_t tag);
  void pumpDirect();
  std::string pumpDirectLocked();  // why the pair must fail, or empty
  std::string postClearToSend(DirectOp& op);
  std::string postDirectWrite(DirectOp& op, const ClearToSend& cts);
  void stopRemoteAccess() noexcept;
  uint64_t workId(Kind kind, uint32_t weight) const {
    return (static_cast<uint64_t>(index_) << 32) | (static_cast<uint64_t>(kind) << 16) | weight;
  }
  void postReceive();
  void postData(const RecvSlot& slot);
  void postCredit(uint32_t slots);
  const VerbsApi& api() const { return device_->api(); }

  std::shared_ptr<IbDevice> device_;
  std::shared_ptr<ProxyWaker> waker_;
  int rank_, peer_;
  uint32_t index_;
  ChannelOptions options_;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  uint8_t* memory_ = nullptr;
  size_t memoryBytes_ = 0;
  uint8_t* recvData_ = nullptr;        // recv slot 0
  WireHeader* wireHeaders_ = nullptr;  // stride kWireHeaderStride
  uint8_t* ctsRing_ = nullptr;         // kDirectSlots records, stride 64
  SlotFifo send_, recv_;
  Socket socket_;
  uint32_t psn_ = 0;

  // Remote side, from connectTo.
  uint64_t remoteSlots_ = 0, remoteHeaders_ = 0, remoteCtsRing_ = 0;
  uint32_t remoteKey_ = 0;

  // Proxy state.
  uint32_t credits_ = 0;        // recv slots of the peer this side may fill
  uint32_t sendPosted_ = 0;     // send slots posted
  uint32_t sendDone_ = 0;       // send slots completed (and released)
  uint32_t recvArrived_ = 0;    // recv slots published
  uint32_t recvCredited_ = 0;   // recv head already returned as credit
  uint32_t sendQueueFree_ = 0;  // work requests the send queue still takes

  // Direct path: operations in issue order per direction (guarded by
  // directMutex_: callers post and poll, the proxy advances them).
  mutable std::mutex directMutex_;
  std::deque<DirectOp> directSends_, directRecvs_;
  std::deque<ClearToSend> arrivedCts_;  // read from the ring, not yet used
  uint64_t nextTicket_ = 1;
  uint32_t ctsSent_ = 0;      // receives announced
  uint32_t recvsDone_ = 0;    // announced receives completed
  uint32_t ctsArrived_ = 0;   // CTS records read from the ring
  std::string failure_;       // guarded by directMutex_

  std::atomic<bool> failed_{false};
  std::atomic<bool> closed_{false};
};

}  // namespace coil::transport::ib
