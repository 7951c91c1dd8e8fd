// The express path of a tcp connection: one extra socket per peer that only
// the calling thread drives (transports/caller_io.h): the one-shot's
// messages, every FIFO program's pieces (caller_path_executor.h), and the
// point-to-point messages' pieces (src/comm/p2p_caller_path.h).
//
// The proxy thread never polls it, so a message on it wakes nobody but the
// thread that waits for it. Wire format: one frame per message, an
// ExpressHeader (the FIFO sockets' FrameHeader, padded to 64 bytes) then the
// payload, validated before use. A small message arrives with one recv():
// the header and whatever follows land in a staging buffer, and bytes that
// belong to the next message (a peer may run a call, or several sends,
// ahead) stay there for it.
//
// Used by one thread at a time (the communicator's caller); shutdown() may
// come from any thread.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "net/socket.h"
#include "transports/tcp/tcp_connection.h"

namespace coil::transport::tcp {

/// The largest express message. Any size is deadlock-free (the caller
/// advances its sends and receives together, without blocking); the limit
/// bounds the receive buffers a one-shot holds per peer.
inline constexpr size_t kExpressMaxBytes = 1024 * 1024;

/// The send buffer asked for on an express socket whose connection stays on
/// this host (staysOnThisHost, net/socket.h); Linux doubles the request for
/// its bookkeeping (384 KiB granted). The other data sockets ask for
/// megabytes, sized for a network's bandwidth-delay product, and a
/// connection across hosts keeps that. On loopback the round trip is tens
/// of microseconds, so a few hundred KiB already covers it many times over
/// and more only lets a write queue megabytes. Under a pacing congestion
/// control (BBR) that queue arrived out of order and was retransmitted:
/// 2 ranks exchanging 8 MiB (sendrecv, 200 calls) retransmitted 444-453
/// segments and moved 2.3-2.4 GB/s each way; with this buffer, none and
/// 3.7-4.0 GB/s. With larger requests some runs were as slow as before, at
/// every size (224 KiB: 1 of 5, 256 KiB: 4 of 9); 128 KiB slowed the
/// 32 MiB all-reduce by a sixth (2026-12-07, docs/performance.md 4.3).
/// Without pacing (reno) this buffer cost sendrecv 6-8% from 512 KiB to
/// 8 MiB and the all-reduce nothing beyond the noise. A stock kernel
/// (net.core.wmem_max 212992) grants every data socket about this much
/// anyway.
inline constexpr int kLocalExpressSendBufferBytes = 192 * 1024;

/// Gives `socket` kLocalExpressSendBufferBytes if its connection stays on
/// this host, and says whether it stays (best effort: a failed setsockopt
/// leaves the buffer as it was, only slower).
bool fitLocalExpressSendBuffer(const Socket& socket);
/// A socket's send buffer as the kernel reports it (SO_SNDBUF; 0 if unknown).
size_t sendBufferOf(const Socket& socket);

/// What a receiver expecting tag `expectedTag` into `capacity` bytes makes of
/// an express frame header, checked in this order: a bad marker (protocol
/// error), another call's tag (the receive completes with the header only),
/// a payload larger than `capacity` (the ranks passed different counts).
/// Pure (no I/O), so the fuzz targets (tests/fuzz) call it directly.
enum class ExpressHeaderVerdict { kAccept, kBadMarker, kOtherTag, kTooLarge };
ExpressHeaderVerdict checkExpressHeader(const FrameHeader& h, uint64_t expectedTag,
                                        size_t capacity);

/// An express frame's header on the wire: a FrameHeader, padded to 64
/// bytes (why: kHeaderBytes in tcp_express.cc).
struct ExpressHeader {
  FrameHeader frame;
  uint8_t padding[64 - sizeof(FrameHeader)];
};
static_assert(sizeof(ExpressHeader) == 64);

class ExpressPath {
 public:
  /// `socket` is connected, authenticated and non-blocking.
  ExpressPath(int peer, Socket socket);

  /// See CallerIo (caller_io.h) for the contracts of these five.
  void beginSend(const void* data, size_t bytes, uint64_t tag);
  void beginRecv(void* buffer, size_t capacity, uint64_t expectedTag);
  bool advance() noexcept;
  bool sendComplete() const { return sendData_ == nullptr; }
  bool recvComplete(size_t* bytes, uint64_t* tag) const;
  const std::string& failure() const { return failure_; }

  /// What poll() should wait for now, as a pollfd (events 0: nothing).
  pollfd pollRequest() const;
  /// Applies what poll() reported for pollRequest().
  void onPollEvents(short revents) noexcept;
  /// The socket's send buffer as the kernel reports it (sendBufferOf).
  size_t sendBufferBytes() const { return sendBufferOf(socket_); }
  /// The peer sees EOF; later advance() calls with something pending fail.
  /// Idempotent, any thread.
  void shutdown() noexcept;

 private:
  bool advanceSend() noexcept;
  bool advanceRecv() noexcept;
  bool takeFromStage() noexcept;
  void failWith(const std::string& why) noexcept;

  const int peer_;
  Socket socket_;
  std::atomic<bool> shut_{false};
  std::string failure_;

  // Outgoing message: header then payload; sendData_ == nullptr when idle.
  const uint8_t* sendData_ = nullptr;
  ExpressHeader sendHeader_{};
  size_t sendDone_ = 0;  // bytes of header + payload written
  bool sendBlocked_ = false;

  // Incoming message.
  uint8_t* recvBuffer_ = nullptr;
  size_t recvCapacity_ = 0;
  uint64_t recvExpectedTag_ = 0;
  bool recvPending_ = false;   // beginRecv called, message not complete
  bool recvHaveHeader_ = false;
  FrameHeader recvHeader_{};
  size_t recvPayloadDone_ = 0;
  std::vector<uint8_t> stage_;  // bytes read ahead of the current message
  size_t staged_ = 0;
};

}  // namespace coil::transport::tcp
