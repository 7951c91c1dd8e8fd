// The express socket of a tcp connection that stays on this host sends from
// a buffer sized for loopback (kLocalExpressSendBufferBytes), on both ends,
// whichever rank connected; the FIFO sockets keep theirs. Across hosts the
// express socket keeps the data sockets' buffer: tests/netns checks that.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "tests/transport/rank_harness.h"
#include "transports/tcp/tcp_connection.h"
#include "transports/tcp/tcp_express.h"
#include "transports/tcp/tcp_transport.h"

namespace coil::transport::testing {
namespace {

// What the kernel grants a socket that asks for `bytes` of send buffer
// (Linux doubles the request, capped by net.core.wmem_max).
size_t grantedSendBuffer(int bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("cannot open a scratch socket");
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  int granted = 0;
  socklen_t length = sizeof granted;
  getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &granted, &length);
  close(fd);
  return static_cast<size_t>(granted);
}

// Every connection of `env` is tcp and its express socket has `expected`.
void expectExpressSendBuffer(RankEnv& env, size_t expected) {
  for (int peer : env.peers) {
    auto* conn = dynamic_cast<tcp::TcpConnection*>(&env.to(peer));
    if (conn == nullptr) throw std::runtime_error("the connection is not tcp's");
    const size_t got = conn->expressSendBufferBytes();
    if (got != expected)
      throw std::runtime_error("rank " + std::to_string(env.rank) + " -> rank " +
                               std::to_string(peer) + ": the express socket sends from " +
                               std::to_string(got) + " bytes, expected " + std::to_string(expected));
  }
}

TEST(TcpExpressBuffer, ALoopbackConnectionSendsFromALoopbackSizedBuffer) {
  const size_t expected = grantedSendBuffer(tcp::kLocalExpressSendBufferBytes);
  const tcp::TcpOptions options{2, 2, 4096, ""};
  auto make = [options](int) { return std::make_unique<tcp::TcpTransport>(options); };
  auto body = [expected](RankEnv& env) {
    expectExpressSendBuffer(env, expected);
    streamAllPairs(env, 20);
  };
  // Three ranks as threads (rank 1 both connects, to 2, and accepts, from
  // 0), and two as processes.
  EXPECT_EQ(joined(runThreads(startLoopbackRoot(), 3, make, body)), "");
  EXPECT_EQ(failedProcesses(runProcesses(2, make, body)), "");
}

}  // namespace
}  // namespace coil::transport::testing
