// DirectIo: an optional path of a Connection for large point-to-point
// messages, straight from the sender's buffer into the receiver's: no slot,
// no copy on either side.
//
// A transport whose NIC writes registered memory (ib) offers it. The
// receiver sends a clear-to-send record with its buffer's address, size and
// key; the sender writes into it with one RDMA WRITE, then a signal that
// completes the receive (NCCL's rendezvous for registered buffers).
//
// The sender takes this path for a message of at least directFromBytes
// (agreed when the pair connected) from a buffer the application
// registered (coilCommRegister: registerBuffer below), and tells the
// receiver so in the FIFO first; the receiver uses its own registration
// when its buffer has one, else registers it for this message. Registering
// on the hot path costs more than the copies it saves (measured on rxe),
// so an unregistered send buffer goes through the slots.
//
// Messages on it are ordered among themselves, in each direction; they have
// no order with the FIFO's slots, so a caller finishes one before it starts
// the next message to that peer on the other path (point-to-point runs the
// operations on one (peer, direction) in issue order anyway). The caller
// polls done(); the transport's progress thread does the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace coil::transport {

class DirectIo {
 public:
  /// Messages of at least this many bytes take this path (the same on both
  /// ends of the pair); SIZE_MAX when it is off (COIL_IB_DIRECT_BYTES=0).
  virtual size_t directFromBytes() const = 0;
  /// Registers [buffer, buffer + bytes) for this path, once per range
  /// however many connections or calls ask (refcounted). Throws when the
  /// device refuses (memlock limit).
  virtual void registerBuffer(void* buffer, size_t bytes) = 0;
  /// Undoes one registerBuffer of that very range.
  virtual void deregisterBuffer(void* buffer, size_t bytes) = 0;
  /// Whether [buffer, buffer + bytes) lies inside a registered range.
  virtual bool registered(const void* buffer, size_t bytes) const = 0;

  /// Receives the next direct message from the peer into `buffer`. It must
  /// be stamped `tag` and be exactly `bytes` long, else the pair fails
  /// naming both. `buffer` stays in use until done(). Returns a ticket.
  virtual uint64_t postRecv(void* buffer, size_t bytes, uint64_t tag) = 0;
  /// Sends `data` as the next direct message, stamped `tag`.
  virtual uint64_t postSend(const void* data, size_t bytes, uint64_t tag) = 0;
  /// True once the operation of `ticket` completed (its buffer is free
  /// again), or once the connection failed (then failure() says why).
  virtual bool done(uint64_t ticket) = 0;
  /// Empty, or why the path failed.
  virtual std::string failure() const = 0;

 protected:
  ~DirectIo() = default;
};

}  // namespace coil::transport
