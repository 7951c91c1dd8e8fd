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
#include "net/socket.h"
#include "transports/out_of_band.h"

namespace coil {

/// What coilUniqueId carries, decoded. Fits in COIL_UNIQUE_ID_BYTES.
struct UniqueIdData {
  SocketAddress root;      // where the root listens
  uint8_t secret[16];      // authenticates every connection of this communicator
  uint64_t nonce;          // distinguishes communicators (shm segment names)
  /// No root runs yet: Bootstrap::create on rank 0 starts it, bound to
  /// `root` (ids from COIL_COMM_ID or a launcher's environment).
  bool rootHostedByRank0 = false;
};

/// Encodes/decodes the public 128-byte id (with magic, version and checksum
/// checks; decode throws coilInvalidArgument on garbage).
coilUniqueId encodeUniqueId(const UniqueIdData& data);
UniqueIdData decodeUniqueId(const coilUniqueId& id);

/// The id of a rendezvous whose root address every rank knows in advance
/// (COIL_COMM_ID, MASTER_ADDR:MASTER_PORT), so no bytes have to be passed
/// around: secret and nonce are derived from SHA-256 of "coil-fixed-root",
/// a private value (COIL_SECRET, else the per-user secret file: see
/// fixed_root_secret.h), `root`'s text and `jobKey` (a launcher's job id; may
/// be empty). rootHostedByRank0 is set. With neither private value anyone
/// who knows the address (and job id) can derive the secret, and a warning
/// says so.
UniqueIdData uniqueIdForFixedRoot(const SocketAddress& root, const std::string& jobKey);

/// What coilGetUniqueId does. COIL_COMM_ID set: uniqueIdForFixedRoot of it
/// with an empty job key, and no root is started here (rank 0 hosts it).
/// Otherwise starts a root (startRoot, port 0) on the address of
/// COIL_SOCKET_IFNAME if set, else the first IPv4 address of an interface
/// that is up and not loopback, else 127.0.0.1. The root waits up to
/// COIL_TIMEOUT_MS (default 30 min) for the ranks.
UniqueIdData makeUniqueId();
/// A unique id whose root listens on 127.0.0.1: for ranks that all live in
/// this process (coilCommInitAll), which never need another interface.
UniqueIdData makeLocalUniqueId();
/// How long a root waits for its ranks: COIL_TIMEOUT_MS, default 30 min.
int64_t rootTimeoutMsFromEnv();

/// Root of a rendezvous: a background thread that accepts nranks
/// authenticated ranks, checks they agree (nranks, distinct ranks), answers
/// each with every rank's listener address, and exits. It also exits at the
/// deadline. Not owned by any communicator: coilGetUniqueId starts it and
/// detaches it (startRoot keeps it alive on its own).
/// `bindAddress` is the address to listen on (port 0: pick one); the
/// returned data holds the bound address and a fresh secret.
/// timeoutMs <= 0: no deadline. Returns once the socket listens; a fixed
/// port that is taken gives coilSystemError.
UniqueIdData startRoot(const SocketAddress& bindAddress, int64_t timeoutMs);
/// As startRoot, for an id that already exists (rootHostedByRank0): listens
/// on exactly `id.root` and authenticates with `id.secret`.
void startRootAt(const UniqueIdData& id, int64_t timeoutMs);
/// Stops the root of `id` if this process hosts it and no rank has joined
/// it yet (an id coilCommInitRankScalable was given but does not use), so
/// it does not wait out its deadline and warn. Otherwise does nothing.
void withdrawRoot(const UniqueIdData& id);

class Bootstrap : public transport::OutOfBand {
 public:
  /// Joins the rendezvous described by `id` as `rank` of `nranks`. Blocks
  /// until the ring is connected or the deadline passes (coilTimeout), or the
  /// abort flag is set. Errors name the peer or root involved; a rendezvous
  /// the root rejected (ranks disagree on nranks, a rank joined twice) gives
  /// coilInvalidUsage with the root's reason. With id.rootHostedByRank0,
  /// rank 0 first starts the root. The listener used to form the ring is
  /// closed once the ring is connected; transports open their own on
  /// localAddress(). `abortFlag` (may be null) must outlive the Bootstrap.
  static std::unique_ptr<Bootstrap> create(const UniqueIdData& id, int rank, int nranks,
                                           const Deadline& deadline,
                                           const std::atomic<bool>* abortFlag);
  virtual ~Bootstrap() = default;

  // rank, nranks, allGather, barrier, secret, localAddress and checkRing:
  // transports/out_of_band.h.
  /// Deadline used for bootstrap operations after create(). Until it is
  /// called, each operation gets a fresh deadline as long as create()'s.
  virtual void setDeadline(const Deadline& deadline) = 0;
  /// Where `rank` listened to form the ring (the root's table). That
  /// listener is closed by now, but every rank knows the address: after a
  /// failure coilCommShrink's abort mode meets there again (shrink.cc).
  virtual SocketAddress listenerOf(int rank) const = 0;
  /// As close(), after a failure: first a one-byte notice to the previous
  /// rank, which never reads from this rank otherwise, so that it fails even
  /// while it waits on someone else (sendRecvAll's watchTo). What breaks a
  /// communicator calls this; a normal teardown calls close().
  virtual void abandon() noexcept = 0;
  /// Closes the ring sockets: blocked peers see EOF. Idempotent; safe from
  /// another thread while an operation blocks (it then fails). A failed
  /// allGather/barrier closes the bootstrap itself, so the failure reaches
  /// every rank promptly instead of at their deadlines.
  virtual void close() noexcept = 0;
};

}  // namespace coil
