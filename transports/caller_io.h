// CallerIo: an optional second path of a Connection, driven by the calling
// thread alone.
//
// A transport whose FIFOs are moved by a helper thread (tcp's proxy,
// tcp_proxy.h) pays two thread wake-ups per message hop: the helper's, then
// the waiting caller's. For a small collective that is most of its latency;
// for a large one the slot copies on both sides are. The FIFO one-shot
// (fifo_oneshot.h) and every FIFO program (caller_path_executor.h) run here
// where every peer has such a path; point-to-point messages
// (src/comm/p2p_caller_path.h) wherever their peer's connection has one.
// A connection that implements CallerIo also carries a separate message path
// (for tcp: one more socket per peer) that no helper thread ever touches:
// the caller sends, polls and sleeps on it directly, like a blocking socket
// program would, so a message costs one kernel hop and nothing else.
//
// It is an isend/irecv pair with one message in flight per direction.
// Messages on it are ordered among themselves; they have no order with the
// FIFO's slots, so a collective uses one path or the other for all its data.
// The algorithm drives progress (advance) and waiting (await), which keeps
// every wait under its deadline and abort flag.
//
// Found through Connection::callerIo(); transports that move data
// without a helper (shm) do not implement it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace coil::transport {

class CallerIo {
 public:
  virtual ~CallerIo() = default;

  /// The largest message the path carries; 0 when this connection has none.
  virtual size_t callerIoMaxBytes() const = 0;

  /// Starts sending one message of `bytes` (<= callerIoMaxBytes) stamped
  /// with `tag`. `data` must stay valid until sendComplete(). Requires the
  /// previous send to be complete.
  virtual void beginSend(const void* data, size_t bytes, uint64_t tag) = 0;
  /// Expects the next incoming message, stamped `expectedTag`, into `buffer`
  /// (`capacity` bytes). A message with another tag completes the receive
  /// at once with its header only (recvComplete reports its tag, so the
  /// caller can name the mismatch); its payload is not read. Requires the
  /// previous receive to be complete.
  virtual void beginRecv(void* buffer, size_t capacity, uint64_t expectedTag) = 0;

  /// Moves whatever can move now, without blocking. True if anything moved.
  /// On a failure (the peer closed, a protocol error) it stops moving and
  /// failure() says why.
  virtual bool advance() = 0;
  virtual bool sendComplete() const = 0;
  /// True once the expected message has arrived, with its size and tag.
  virtual bool recvComplete(size_t* bytes, uint64_t* tag) const = 0;
  /// Empty, or why the path failed ("rank 3 closed the connection").
  virtual const std::string& failure() const = 0;

  /// Sleeps until advance() may move something on any of `group` (bytes
  /// arrived, room for pending outgoing bytes, a failure), or `ms` passed.
  /// Every element must come from the same transport as this object.
  /// Spurious returns are allowed.
  virtual void awaitAny(const std::vector<CallerIo*>& group, int ms) = 0;
};

}  // namespace coil::transport
