// Bootstrap: rendezvous and out-of-band collectives over TCP.
//
//   coilGetUniqueId ──► UniqueIdData { root address, 128-bit secret, comm nonce }
//   every rank      ──► Bootstrap::create(id, rank, nranks)
//                         1. opens its own listener (the interface of
//                            COIL_SOCKET_IFNAME, else the one that routes to the root)
//                         2. connects to the root, authenticates, sends {rank, nranks, listener}
//                         3. root replies to all with every rank's listener address
//                         4. rank r connects to rank r+1 (authenticated): the bootstrap ring
//   allGather / barrier run around that ring.
//
// Every accepted connection (root, ring, and the tcp transport's data
// connections through auth.h) must prove knowledge of the secret before
// anything it sends is used; a stranger is logged and dropped.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "coil.h"
#include "core/deadline.h"
#include "bootstrap/socket.h"

namespace coil {

/// What coilUniqueId carries, decoded. Fits in COIL_UNIQUE_ID_BYTES.
struct UniqueIdData {
  SocketAddress root;      // where the root listens
  uint8_t secret[16];      // authenticates every connection of this communicator
  uint64_t nonce;          // distinguishes communicators (shm segment names)
};

/// Encodes/decodes the public 128-byte id (with magic and version checks;
/// decode throws coilInvalidArgument on garbage).
coilUniqueId encodeUniqueId(const UniqueIdData& data);
UniqueIdData decodeUniqueId(const coilUniqueId& id);

/// Root of a rendezvous: a background thread that accepts nranks
/// authenticated ranks, checks they agree (nranks, distinct ranks), answers
/// each with every rank's listener address, and exits. It also exits at the
/// deadline. Not owned by any communicator: coilGetUniqueId starts it and
/// detaches it (startRoot keeps it alive on its own).
/// `bindAddress` is the address to listen on (port 0: pick one); the
/// returned data holds the bound address and a fresh secret.
UniqueIdData startRoot(const SocketAddress& bindAddress, int64_t timeoutMs);

class Bootstrap {
 public:
  /// Joins the rendezvous described by `id` as `rank` of `nranks`. Blocks
  /// until the ring is connected or the deadline passes (coilTimeout), or the
  /// abort flag is set. Errors name the peer or root involved.
  static std::unique_ptr<Bootstrap> create(const UniqueIdData& id, int rank, int nranks,
                                           const Deadline& deadline,
                                           const std::atomic<bool>* abortFlag);
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  /// `data` holds nranks blocks of `bytesPerRank`; block rank() is this
  /// rank's contribution. On return every block is filled. Collective.
  virtual void allGather(void* data, size_t bytesPerRank) = 0;
  /// Collective: returns once every rank has entered.
  virtual void barrier() = 0;
  /// The communicator's secret, for transports that authenticate connections.
  virtual const uint8_t* secret() const = 0;
  /// The local IP address this rank advertises (transports listen on it).
  virtual SocketAddress localAddress() const = 0;
  /// Deadline used for bootstrap operations after create().
  virtual void setDeadline(const Deadline& deadline) = 0;
  /// Closes the ring sockets: blocked peers see EOF. Idempotent.
  virtual void close() noexcept = 0;
};

}  // namespace coil
