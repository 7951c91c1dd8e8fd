// One tcp connection to a peer: two SlotFifos in process memory, and the
// `nsocks` sockets the proxy thread (tcp_proxy.h) moves their slots over.
//
// Wire format: each socket carries a sequence of frames
//
//     FrameHeader { uint32 bytes, uint32 marker, uint64 tag }  then `bytes` payload bytes
//
// Frame k of a connection (the k-th slot published into the send FIFO) goes on
// socket k % nsocks, so several sockets fill the pipe at once. The receiver
// reads frame k from socket k % nsocks straight into receive slot k and
// publishes frames in k order, so order is restored without sequence numbers.
// Every header is validated before its length is used.
//
// Failure model: EOF, reset or a protocol error on any socket ends the
// connection: the receive FIFO's producer and the send FIFO's consumer are
// closed, so an executor blocked in peek()/acquire() gets PeerClosed at once.
// Frames that arrived completely before a clean EOF are still delivered.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "net/socket.h"
#include "transports/caller_io.h"
#include "transports/slot_fifo.h"
#include "transports/tcp/tcp_proxy.h"
#include "transports/transport.h"

namespace coil::transport::tcp {

struct FrameHeader {
  uint32_t bytes;
  uint32_t marker;  // kFrameMarker: catches a desynchronised stream early
  uint64_t tag;
};
static_assert(sizeof(FrameHeader) == 16);
inline constexpr uint32_t kFrameMarker = 0x31464354;  // "TCF1"

/// The receiver's check of a frame header, before its length is used: the
/// marker must be kFrameMarker and the payload must fit a `slotBytes`-byte
/// slot. False with the reason in *why otherwise. Pure (no I/O), so the
/// fuzz targets (tests/fuzz) call it directly.
bool validateFrameHeader(const FrameHeader& h, uint32_t slotBytes, std::string* why);

class ExpressPath;  // tcp_express.h

/// Owns the memory of one FIFO that lives in this process: the control block
/// and a page-aligned data area. Both FIFO ends are this process.
class FifoMemory {
 public:
  /// Allocates and init()s; producer and consumer pid are getpid().
  FifoMemory(uint32_t slotCount, uint32_t slotBytes);
  /// A SlotFifo over this memory (valid while this object lives).
  SlotFifo view() const { return SlotFifo(control_.get(), data_.get()); }
  /// Start of slot `index` (< slotCount) in the data area.
  uint8_t* slot(uint32_t index) const;

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<FifoControl> control_;
  std::unique_ptr<uint8_t, FreeDeleter> data_;
};

/// Where a pollfd came from, so the proxy can route its events back.
struct PollOwner {
  TcpChannel* channel;
  uint32_t socket;
};

/// The state of one connection, shared by its Connection handle (executor
/// side) and the proxy thread. Methods marked "proxy only" run on the proxy
/// thread alone; the others are thread-safe.
class TcpChannel {
 public:
  /// `sockets` are connected, authenticated and non-blocking; socket i carries
  /// frames i, i + n, i + 2n, ... Requires sockets.size() <= slotCount.
  /// `express`, when valid, is one more such socket: the express path
  /// (tcp_express.h), driven by the caller and never by the proxy.
  TcpChannel(int peer, std::vector<Socket> sockets, uint32_t slotCount, uint32_t slotBytes,
             std::shared_ptr<ProxyWaker> waker, Socket express = Socket());
  ~TcpChannel();

  /// The peer's rank.
  int peer() const { return peer_; }
  /// The executor produces into it; the proxy writes its slots to the sockets.
  SlotFifo& sendFifo() { return sendFifo_; }
  /// The proxy fills it from the sockets; the executor consumes it.
  SlotFifo& recvFifo() { return recvFifo_; }
  /// Wakes the proxy if it sleeps (after the executor published or released).
  void kick() noexcept { waker_->kick(); }
  /// The express path, or nullptr when the channel has none.
  ExpressPath* express() const { return express_.get(); }
  /// This side is gone: shuts the sockets down (the peer sees EOF) and closes
  /// the FIFO ends the proxy serves, so local waits end with PeerClosed.
  /// Idempotent, any thread, never blocks.
  void close() noexcept;

  // ---- proxy only ----------------------------------------------------------
  /// Moves whatever can move without blocking. True if anything moved.
  bool progress() noexcept;
  /// True if progress() could move something right now without poll()
  /// reporting readiness first (re-reads the FIFO counters).
  bool wantsAttempt() noexcept;
  /// Appends a pollfd for every socket that waits for readiness.
  void addPollFds(std::vector<pollfd>& fds, std::vector<PollOwner>& owners);
  /// Applies poll()'s verdict for socket `index`.
  void onPollEvents(uint32_t index, short revents) noexcept;
  /// Closed locally, or nothing can move in either direction any more.
  bool finished() const noexcept;
  /// Shuts the sockets down (idempotent); used when the proxy drops a channel.
  void shutdownSockets() noexcept;

 private:
  struct SocketIo {
    Socket socket;
    uint64_t sendFrame = 0;  // next frame this socket sends
    size_t sendDone = 0;     // bytes of its header + payload already written
    FrameHeader sendHeader{};
    bool sendBlocked = false;  // last write hit a full buffer: wait for POLLOUT
    uint64_t recvFrame = 0;    // next frame this socket receives
    size_t recvDone = 0;       // bytes of its header + payload already read
    FrameHeader recvHeader{};
    bool recvBlocked = false;   // last read drained the buffer: wait for POLLIN
    bool peerFinished = false;  // FIN/HUP seen: polled only for POLLIN from now on
    bool eof = false;           // read returned 0 at a frame boundary
  };

  void refreshCounters() noexcept;
  bool sendInterest(const SocketIo& s) const noexcept;
  bool recvInterest(const SocketIo& s) const noexcept;
  bool progressSend(SocketIo& s) noexcept;
  bool progressRecv(SocketIo& s) noexcept;
  void releaseSentSlots() noexcept;
  void publishReceivedSlots() noexcept;
  void onCleanEof(SocketIo& s) noexcept;
  void endSend(const char* why) noexcept;
  void endRecv() noexcept;
  void failConnection(const std::string& why) noexcept;
  uint32_t slotIndex(uint64_t frame) const { return static_cast<uint32_t>(frame) % slotCount_; }
  SocketIo& socketOf(uint64_t frame) { return sockets_[frame % sockets_.size()]; }

  const int peer_;
  const uint32_t slotCount_;
  const uint32_t slotBytes_;
  FifoMemory sendMem_, recvMem_;
  SlotFifo sendFifo_, recvFifo_;
  std::vector<SocketIo> sockets_;  // the vector never changes after construction
  std::shared_ptr<ProxyWaker> waker_;
  std::unique_ptr<ExpressPath> express_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> socketsShut_{false};

  // Proxy-only progress counters, 64-bit so they never wrap (the FIFO's own
  // 32-bit counters are their low halves).
  uint64_t sendPublished_ = 0;  // frames the executor has published
  uint64_t sendReleased_ = 0;   // frames fully written and released
  uint64_t recvPublished_ = 0;  // frames published to the executor
  uint64_t recvReleased_ = 0;   // frames the executor has released
  uint32_t recvBytes_[kMaxSlots] = {};  // completed frames awaiting in-order publication
  uint64_t recvTags_[kMaxSlots] = {};
  bool sendEnded_ = false;
  bool recvEnded_ = false;
  bool failed_ = false;
};

/// The Connection handed to the executor: a handle on a shared channel, so
/// the channel (sockets, FIFO memory) lives as long as either the handle or
/// the proxy uses it. Destroying the handle closes the connection. The
/// methods are Connection's (transport.h) and CallerIo's (caller_io.h; a
/// channel without an express path reports callerIoMaxBytes() == 0).
class TcpConnection final : public Connection, public CallerIo {
 public:
  explicit TcpConnection(std::shared_ptr<TcpChannel> channel) : channel_(std::move(channel)) {}
  ~TcpConnection() override { channel_->close(); }
  SlotFifo& sendFifo() override { return channel_->sendFifo(); }
  SlotFifo& recvFifo() override { return channel_->recvFifo(); }
  void kick() noexcept override { channel_->kick(); }
  bool sent() const override { return channel_->sendFifo().pending() == 0; }
  void close() noexcept override { channel_->close(); }
  const Traits& traits() const override;
  CallerIo* callerIo() override { return this; }
  int peer() const override { return channel_->peer(); }

  // CallerIo over the channel's express path (tcp_express.cc).
  size_t callerIoMaxBytes() const override;
  void beginSend(const void* data, size_t bytes, uint64_t tag) override;
  void beginRecv(void* buffer, size_t capacity, uint64_t expectedTag) override;
  bool advance() override;
  bool sendComplete() const override;
  bool recvComplete(size_t* bytes, uint64_t* tag) const override;
  const std::string& failure() const override;
  void awaitAny(const std::vector<CallerIo*>& group, int ms) override;
  /// The express socket's send buffer as the kernel reports it (SO_SNDBUF).
  size_t expressSendBufferBytes() const;

 private:
  ExpressPath& express() const;
  std::shared_ptr<TcpChannel> channel_;
};

}  // namespace coil::transport::tcp
