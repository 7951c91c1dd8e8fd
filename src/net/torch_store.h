// A client of torch.distributed's TCPStore: the key-value server that
// torchrun's agent already runs on MASTER_ADDR:MASTER_PORT for its workers
// (TORCHELASTIC_USE_AGENT_STORE=True).
//
// coilCommInitFromEnv uses it the way ProcessGroupNCCL does: rank 0 makes a
// unique id on a port the kernel picks and sets it under a key; the other
// ranks wait for that key. No rank has to guess a free port next to the
// store's (MASTER_PORT+1 was often the local port of one of torchrun's own
// store connections: launcher_env.cc).
//
// The wire format, as torch 2.x speaks it (all integers little-endian, the
// sizes 64-bit): a query is one type byte, then its arguments, a string or
// byte vector as its length then its bytes. A connection opens with
// VALIDATE + a 32-bit magic, then GETNUMKEYS, answered with a 64-bit count
// (torch 2.4's store has no PING). SET answers nothing; WAIT answers one
// byte when every key exists; GET answers a byte vector. Only these five
// queries are used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/deadline.h"
#include "net/socket.h"

namespace coil {

class TorchStoreClient {
 public:
  /// Connects to the store at `address` and validates the connection (the
  /// server's answer to GETNUMKEYS). A server that does not answer like a
  /// TCPStore gives coilRemoteError naming `address`; none listening before
  /// the deadline gives coilTimeout.
  static TorchStoreClient connect(const SocketAddress& address, const Deadline& deadline);

  /// Sets `key` to `value` (replacing any value it had).
  void set(const std::string& key, const std::vector<uint8_t>& value, const Deadline& deadline);

  /// Waits until `key` exists, then returns its value. coilTimeout at the
  /// deadline (the message names the key); the store going away is
  /// coilRemoteError.
  std::vector<uint8_t> waitAndGet(const std::string& key, const Deadline& deadline);

 private:
  TorchStoreClient(Socket socket, SocketAddress address)
      : socket_(std::move(socket)), address_(address) {}
  void send(const std::vector<uint8_t>& query, const Deadline& deadline);
  void receive(void* data, size_t bytes, const Deadline& deadline);

  std::string name() const { return "the torch store at " + address_.toString(); }

  Socket socket_;
  SocketAddress address_;
};

}  // namespace coil
