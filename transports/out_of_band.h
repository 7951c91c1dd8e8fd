// OutOfBand: what a transport may ask of the communicator while it sets up.
//
// Transports exchange their addresses and prove who they are over a channel
// that exists before any of them: the communicator's bootstrap ring
// (src/bootstrap) implements this interface, a test harness may implement
// it otherwise. A transport includes this header, never the bootstrap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "net/socket.h"

namespace coil::transport {

class OutOfBand {
 public:
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  /// `data` holds nranks blocks of `bytesPerRank`; block rank() is this
  /// rank's contribution. On return every block is filled. Collective.
  virtual void allGather(void* data, size_t bytesPerRank) = 0;
  /// Collective: returns once every rank has entered.
  virtual void barrier() = 0;
  /// The communicator's secret (auth::kSecretBytes): a transport that
  /// accepts connections makes every one prove it knows it (net/auth.h).
  virtual const uint8_t* secret() const = 0;
  /// The local IP address this rank advertises: transports that listen
  /// listen there.
  virtual SocketAddress localAddress() const = 0;
  /// Throws coilRemoteError when a rank is known to have failed or died
  /// (a closed ring neighbour). Non-blocking: a transport waiting for a
  /// peer during setup calls it between polls, so that a rank that died
  /// during init fails its peers at once instead of at their deadline.
  virtual void checkRing() const = 0;

 protected:
  ~OutOfBand() = default;
};

}  // namespace coil::transport
