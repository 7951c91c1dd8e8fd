// The transport interface: how coil moves bytes to one peer.
//
// A transport's whole job is to give each pair of connected ranks two
// SlotFifos (slot_fifo.h), one per direction, and to report when the peer is
// gone. Algorithms only ever see those FIFOs, through the executor in
// src/algorithms; they never see sockets or segments. Transports never know
// which collective is running.
//
// Rules every transport follows:
//  - connect() is collective: every rank of the communicator calls it, in the
//    same order for every registered transport, even with an empty peer list,
//    so that bootstrap exchanges line up. It blocks (with ctx.deadline) until
//    the connections are usable.
//  - Every connection it accepts proves knowledge of the communicator's
//    secret (src/net/auth.h) before any state is touched.
//  - Data moves without the caller's help: shm because the peer writes our
//    memory, tcp through a per-communicator proxy thread. A FIFO wait is all a
//    collective ever does.
//  - A failure (socket EOF/RST, dead process) closes the affected FIFOs so a
//    blocked wait ends with PeerClosed/PeerDied, never hangs.
//  - close() tells the peer this side is gone; it must be safe to call twice,
//    from any thread, and must not block for long.
//  - A rank keeps its bootstrap open until every rank has returned from
//    connect() (the communicator's init goes on with bootstrap steps): a
//    transport waiting for a peer may take a closed neighbour bootstrap for
//    a rank that died during init (OutOfBand::checkRing).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/deadline.h"
#include "transports/link_cost.h"
#include "transports/out_of_band.h"
#include "transports/slot_fifo.h"

namespace coil::transport {

class CallerIo;
class DirectIo;

/// What every rank publishes about itself at init (exchanged by allGather).
struct PeerInfo {
  uint64_t hostHash;  // same value <=> same host (boot id, hostname, net namespace)
  int32_t pid;
  int32_t rank;
};

/// How a transport describes itself to the layers above, which never name
/// one: the tuner reads its costs, the communicator its capabilities.
struct Traits {
  /// For logs, COIL_TRANSPORT and COIL_TUNE targets. Never compared outside
  /// transports/ except with what a user typed.
  const char* name;
  /// Ranks it connects load and store each other's memory: the one-host
  /// window algorithms (window.h) may run when every link has this.
  bool peerMemoryMapped;
  /// Ring and tree over its FIFOs.
  LinkCost fifo;
  /// The FIFO one-shot: one message per peer (over CallerIo where the
  /// connection has one).
  LinkCost oneShot;
  /// Ring, tree and the other FIFO programs on the caller-driven paths
  /// (CallerIo), where every rank has one to every peer; all zero for a
  /// transport whose connections have none.
  LinkCost callerPath = {};
};

/// What one rank publishes about itself for one transport before any
/// connect() (its device, its port): exchanged by the communicator, read by
/// canReach on both ends of a pair, so that both pick the same transport.
inline constexpr size_t kAddressBytes = 120;
struct Address {
  uint32_t length = 0;  // 0: this rank has nothing (the transport is unusable here)
  uint8_t bytes[kAddressBytes] = {};
};

/// One end of a pair, as canReach sees it.
struct Endpoint {
  const PeerInfo& info;
  const Address& address;
};

/// Connection to one peer: both directions.
class Connection {
 public:
  virtual ~Connection() = default;
  /// FIFO this rank produces into; the transport delivers it to the peer.
  virtual SlotFifo& sendFifo() = 0;
  /// FIFO the transport fills with what the peer sent; this rank consumes.
  virtual SlotFifo& recvFifo() = 0;
  /// Called by the executor after it published into sendFifo() or released a
  /// slot of recvFifo(). Transports whose data is moved by a proxy thread
  /// (tcp) wake it here; shm needs nothing (the peer reads our memory).
  /// Must be cheap: no syscall unless the proxy is asleep.
  virtual void kick() noexcept {}
  /// Whether everything published on sendFifo() has left this process
  /// (shm: at once, the peer reads our memory; tcp: once the proxy has
  /// handed it to the socket). A rank that fails waits, briefly, for its
  /// failure notice (src/algorithms/failure_notice.h) to leave before it
  /// closes.
  virtual bool sent() const { return true; }
  /// Tells the peer this side is gone (abort or error). Idempotent, thread-safe.
  virtual void close() noexcept = 0;
  /// The transport this connection belongs to.
  virtual const Traits& traits() const = 0;
  /// Its caller-driven message path (caller_io.h), or nullptr.
  virtual CallerIo* callerIo() { return nullptr; }
  /// Its zero-copy path for large point-to-point messages (direct_io.h),
  /// or nullptr.
  virtual DirectIo* directIo() { return nullptr; }
  /// Peer rank.
  virtual int peer() const = 0;
};

/// Inputs to Transport::connect.
struct SetupContext {
  OutOfBand& oob;
  int rank;
  int nranks;
  const std::vector<PeerInfo>& peers;  // indexed by rank
  Deadline deadline;
  const std::atomic<bool>* abortFlag;
  std::string commLabel;  // for names and logs (unique per communicator)
  /// This transport's localAddress() of every rank (indexed by rank), as
  /// exchanged before connect; null where the caller exchanged none.
  const std::vector<Address>* addresses = nullptr;
};

/// A transport kind. One instance per communicator (it owns shared state such
/// as a proxy thread or a segment), created through the registry.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const Traits& traits() const = 0;
  const char* name() const { return traits().name; }
  /// Why this transport cannot run on this rank at all (no device, a
  /// library missing), or empty. Named in the error when COIL_TRANSPORT
  /// forces it.
  virtual std::string unusable() { return {}; }
  /// This rank's address (Address::length 0 when unusable), for its peers:
  /// canReach reads it, and connect finds it in SetupContext::addresses.
  /// Called once, before both; `oob` says where this rank listens.
  virtual Address localAddress(const OutOfBand& /*oob*/) { return Address{}; }
  /// Can this transport connect `self` to `peer`? Must give the same
  /// answer on both ends (shm: same host; ib: both have a usable port).
  virtual bool canReach(const Endpoint& self, const Endpoint& peer) const = 0;
  /// Collective: connects to each rank in `peerRanks`. Result[i] connects to
  /// peerRanks[i]. Must be called by every rank (peer lists may be empty).
  virtual std::vector<std::unique_ptr<Connection>> connect(SetupContext& ctx,
                                                           const std::vector<int>& peerRanks) = 0;
  /// Stops helper threads (after letting them deliver what was already
  /// published, bounded) and closes every connection. Idempotent. The owner
  /// calls it BEFORE destroying the connections connect() returned.
  virtual void shutdown() noexcept = 0;
};

/// Registry: transports register a factory under a name; order of
/// registration is the order of preference (shm before tcp).
using TransportFactory = std::function<std::unique_ptr<Transport>()>;
void registerTransport(const std::string& name, int preference, TransportFactory factory);
/// Names in order of preference.
std::vector<std::string> registeredTransports();
std::unique_ptr<Transport> createTransport(const std::string& name);

}  // namespace coil::transport
