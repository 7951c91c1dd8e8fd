// The ib transport: libibverbs RC queue pairs, one per peer (ib_channel.h),
// moved by one progress thread per communicator (ib_proxy.h).
//
// Setup: every rank with a usable port listens on the out-of-band address
// and publishes it with the port (localAddress; the communicator exchanges
// every transport's address before any connects); a lower rank connects
// to each higher one, proves it knows the communicator's secret
// (net/auth.h) and sends its queue pair's address, the higher rank answers
// with its own; both move their QPs to
// RTS and tell each other they did, so no write ever reaches a QP that is
// not ready. The socket then stays open, silent, as the pair's liveness
// signal.
//
// Reach: any two ranks whose ports have the same link layer (both RoCE or
// both InfiniBand). Preference 50: after shm on one host, before tcp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transports/ib/ib_channel.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/ib_proxy.h"
#include "transports/transport.h"

namespace coil::transport::ib {

class IbTransport final : public Transport {
 public:
  IbTransport();
  ~IbTransport() override;

  const Traits& traits() const override;
  /// Opens the device on first use (COIL_IB_*); empty once one is usable.
  std::string unusable() override;
  /// The port, and a fresh setup listener on the out-of-band interface.
  Address localAddress(const OutOfBand& oob) override;
  bool canReach(const Endpoint& self, const Endpoint& peer) const override;
  std::vector<std::unique_ptr<Connection>> connect(SetupContext& ctx,
                                                   const std::vector<int>& peerRanks) override;
  void shutdown() noexcept override;

 private:
  std::shared_ptr<IbDevice> device_;
  std::string why_;  // why device_ is null
  Socket listener_;  // from localAddress() until connect() is done with it
  ChannelOptions options_;
  std::shared_ptr<ProxyWaker> waker_;
  std::unique_ptr<IbProxy> proxy_;
  std::vector<std::shared_ptr<IbChannel>> channels_;
  bool shutDown_ = false;
};

}  // namespace coil::transport::ib
