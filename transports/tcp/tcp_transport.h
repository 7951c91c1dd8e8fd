// The tcp transport: reaches every peer over TCP sockets.
//
// connect() (collective) opens a data listener on the bootstrap's local
// address when some lower rank will connect to this one, allGathers every
// rank's listener address, then the lower rank of each pair opens `nsocks`
// FIFO sockets plus one express socket (tcp_express.h) to the higher one. Every socket authenticates with the
// communicator secret (auth.h, purpose "tcp-data") and then says hello
// {fromRank, toRank, socketIndex, nsocks, slotCount, slotBytes}; anything
// else reaching the listener is logged as a stranger and dropped. The
// listener runs all handshakes at once (net/acceptor.h), so strangers
// that connect and stay silent cannot delay the real peers.
//
// Each connection then owns two SlotFifos in process memory, and one proxy
// thread per transport (tcp_proxy.h) moves their slots over the sockets
// (tcp_connection.h has the wire format).
//
// Knobs (every rank must use the same values; connect() checks):
//   COIL_NSOCKS          sockets per peer, 1..16          (default kDefaultNsocks)
//   COIL_TCP_SLOTS       slots per FIFO, power of two <= 16 (default kDefaultSlotCount)
//   COIL_TCP_SLOT_BYTES  bytes per slot, 1..64 MiB        (default kDefaultSlotBytes)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/socket.h"
#include "transports/transport.h"

namespace coil::transport::tcp {

class TcpProxy;
class TcpChannel;

// Chosen by measurement (2 processes streaming 256 MiB over loopback): more
// sockets cost less CPU per byte (fewer proxy sleep/wake cycles per slot) at
// equal or better throughput; 4 keeps the fd count per peer modest.
// Slots of 128 KiB: a 2-rank ring all-reduce of 64 MiB took 25-30% less CPU
// time than with 512 KiB slots (24.5 vs 35-40 ms per rank: 8 slots of a FIFO
// then stay in the 1 MiB L2), and 1 MiB messages pipeline in 4 slices.
inline constexpr int kDefaultNsocks = 4;
inline constexpr uint32_t kDefaultSlotCount = 8;
inline constexpr uint32_t kDefaultSlotBytes = 128 * 1024;

/// Per-transport parameters. Both ends of a connection must agree.
struct TcpOptions {
  int nsocks = kDefaultNsocks;
  uint32_t slotCount = kDefaultSlotCount;
  uint32_t slotBytes = kDefaultSlotBytes;
  /// The TCP congestion control set on every data socket; "" leaves the
  /// system's default (congestion_control.h says why one would set it).
  std::string congestion;

  /// Defaults overridden by COIL_NSOCKS / COIL_TCP_SLOTS / COIL_TCP_SLOT_BYTES
  /// and COIL_TCP_CONGESTION (checked on a scratch socket).
  /// If only COIL_NSOCKS is set and exceeds the default slot count, the slot
  /// count grows to match. Throws coilInvalidUsage naming a bad variable.
  static TcpOptions fromEnv();
  /// Throws coilInvalidUsage unless 1 <= nsocks <= slotCount, slotCount is a
  /// power of two <= kMaxSlots, and 1 <= slotBytes <= 64 MiB.
  /// (Power of two: SlotFifo maps its wrapping 32-bit counters to slots with
  /// `counter % slotCount`, which stays consistent across the wrap only when
  /// slotCount divides 2^32. nsocks <= slotCount: every socket can have a
  /// frame in flight, so every socket is watched while the executor waits.)
  void validate() const;
};

class TcpTransport final : public Transport {
 public:
  /// Validates `options` (throws coilInvalidUsage).
  explicit TcpTransport(TcpOptions options);
  /// Calls shutdown().
  ~TcpTransport() override;

  const Traits& traits() const override;
  /// TCP reaches every peer.
  bool canReach(const Endpoint&, const Endpoint&) const override { return true; }
  /// Collective (see the file comment). Throws coilInvalidArgument for a bad
  /// peer list, coilInvalidUsage when ranks disagree on options or peer lists
  /// are not symmetric, coilTimeout at ctx.deadline (naming the missing
  /// peers), coilRemoteError when a peer fails during setup.
  std::vector<std::unique_ptr<Connection>> connect(SetupContext& ctx,
                                                   const std::vector<int>& peerRanks) override;
  /// Stops the proxy thread and closes every connection (their FIFO waits
  /// end with PeerClosed). Data not yet written to a socket is dropped, so a
  /// communicator synchronises (barrier) before a normal teardown. Idempotent.
  void shutdown() noexcept override;

  const TcpOptions& options() const { return options_; }
  /// Test hook: `observer` is called inside connect() with the data
  /// listener's address right after it opens, before any peer learns it.
  void setListenerObserver(std::function<void(const SocketAddress&)> observer) {
    listenerObserver_ = std::move(observer);
  }

 private:
  TcpOptions options_;
  std::unique_ptr<TcpProxy> proxy_;
  std::vector<std::shared_ptr<TcpChannel>> channels_;  // drained at shutdown
  std::function<void(const SocketAddress&)> listenerObserver_;
  bool shutDown_ = false;
};

}  // namespace coil::transport::tcp
