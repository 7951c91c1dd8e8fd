// SocketAddress parsing and the deadline/abort behaviour of Socket's helpers.
#include "net/socket.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace coil {
namespace {

using test::loopback;
using Seconds = std::chrono::duration<double>;

double secondsSince(std::chrono::steady_clock::time_point t) {
  return Seconds(std::chrono::steady_clock::now() - t).count();
}

TEST(SocketAddress, ParsesIpv4) {
  SocketAddress a = SocketAddress::parse("127.0.0.1:5000");
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 5000);
  EXPECT_EQ(a.toString(), "127.0.0.1:5000");
  EXPECT_EQ(SocketAddress::parse("10.1.2.3:0").toString(), "10.1.2.3:0");
  EXPECT_EQ(SocketAddress::parse("1.2.3.4:65535").port(), 65535);
}

TEST(SocketAddress, ParsesBracketedIpv6) {
  SocketAddress a = SocketAddress::parse("[::1]:80");
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.port(), 80);
  EXPECT_EQ(a.toString(), "[::1]:80");
  EXPECT_EQ(SocketAddress::parse("[fd00::2]:1234").toString(), "[fd00::2]:1234");
}

TEST(SocketAddress, ResolvesLocalhost) {
  SocketAddress a = SocketAddress::parse("localhost:4321");
  EXPECT_EQ(a.port(), 4321);
  std::string text = a.toString();
  EXPECT_TRUE(text == "127.0.0.1:4321" || text == "[::1]:4321") << text;
}

TEST(SocketAddress, SetPort) {
  SocketAddress a = SocketAddress::parse("127.0.0.1:1");
  a.setPort(777);
  EXPECT_EQ(a.toString(), "127.0.0.1:777");
  SocketAddress b = SocketAddress::parse("[::1]:1");
  b.setPort(778);
  EXPECT_EQ(b.toString(), "[::1]:778");
}

TEST(SocketAddress, TellsWhetherAConnectionStaysOnThisHost) {
  auto stays = [](const char* local, const char* peer) {
    return staysOnThisHost(SocketAddress::parse(local), SocketAddress::parse(peer));
  };
  // A loopback peer, whatever this end's address.
  EXPECT_TRUE(stays("127.0.0.1:40000", "127.0.0.1:50000"));
  EXPECT_TRUE(stays("127.0.0.1:40000", "127.0.0.2:50000"));
  EXPECT_TRUE(stays("[::1]:40000", "[::1]:50000"));
  EXPECT_TRUE(stays("[::ffff:127.0.0.1]:1", "[::ffff:127.0.0.1]:2"));
  // This host's own address on both ends (Linux routes it through lo).
  EXPECT_TRUE(stays("10.0.0.1:40000", "10.0.0.1:50000"));
  EXPECT_TRUE(stays("[fd00::2]:40000", "[fd00::2]:50000"));
  // Another address: another host (or a namespace standing in for one).
  EXPECT_FALSE(stays("10.0.0.1:40000", "10.0.0.2:50000"));
  EXPECT_FALSE(stays("[fd00::2]:40000", "[fd00::3]:50000"));
  EXPECT_FALSE(stays("10.0.0.1:40000", "[::ffff:10.0.0.2]:50000"));
}

TEST(Socket, ALoopbackConnectionStaysOnThisHost) {
  Socket listener = Socket::listen(loopback());
  Socket client = Socket::connect(listener.localAddress(), Deadline::after(5000));
  Socket server = listener.accept(Deadline::after(5000));
  EXPECT_TRUE(staysOnThisHost(client.localAddress(), client.peerAddress()));
  EXPECT_TRUE(staysOnThisHost(server.localAddress(), server.peerAddress()));
}

TEST(SocketAddress, RejectsMalformedText) {
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
                          "127.0.0.1:12ab", "127.0.0.1:123456", "::1:80", "[::1]80", "[::1",
                          ":80", "[]:80", "[127.0.0.1]:80", "[not-an-ip]:80"}) {
    try {
      SocketAddress::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), coilInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << "message does not name the text: " << e.what();
    }
  }
}

TEST(SocketAddress, OfInterface) {
  SocketAddress lo = SocketAddress::ofInterface("lo");
  EXPECT_EQ(lo.toString(), "127.0.0.1:0");
  try {
    SocketAddress::ofInterface("nosuchif0");
    ADD_FAILURE() << "no error for a missing interface";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("nosuchif0"), std::string::npos) << e.what();
  }
}

// A connected pair over loopback: {client, server side}.
std::pair<Socket, Socket> connectedPair() {
  Socket listener = Socket::listen(loopback());
  Socket client = Socket::connect(listener.localAddress(), Deadline::after(5000));
  Socket server = listener.accept(Deadline::after(5000));
  return {std::move(client), std::move(server)};
}

TEST(Socket, ConnectAcceptSendRecv) {
  Socket listener = Socket::listen(loopback());
  SocketAddress at = listener.localAddress();
  EXPECT_NE(at.port(), 0);
  Socket client = Socket::connect(at, Deadline::after(5000));
  SocketAddress peer;
  Socket server = listener.accept(Deadline::after(5000), nullptr, &peer);
  EXPECT_EQ(peer.toString(), client.localAddress().toString());
  EXPECT_EQ(server.peerAddress().toString(), client.localAddress().toString());
  EXPECT_EQ(client.peerAddress().toString(), at.toString());

  std::vector<uint8_t> out(300000), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 13 + 5);
  std::thread sender([&] { client.sendAll(out.data(), out.size(), Deadline::after(5000)); });
  server.recvAll(in.data(), in.size(), Deadline::after(5000));
  sender.join();
  EXPECT_EQ(in, out);
}

TEST(Socket, ConnectRetriesUntilThePeerListens) {
  uint16_t port;
  {
    Socket probe = Socket::listen(loopback());
    port = probe.localAddress().port();
  }  // closed: connecting now is refused
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Socket listener = Socket::listen(loopback(port));
    Socket s = listener.accept(Deadline::after(5000));
    uint8_t byte = 42;
    s.sendAll(&byte, 1, Deadline::after(5000));
  });
  auto start = std::chrono::steady_clock::now();
  Socket s = Socket::connect(loopback(port), Deadline::after(5000));
  EXPECT_GE(secondsSince(start), 0.2);
  uint8_t byte = 0;
  s.recvAll(&byte, 1, Deadline::after(5000));
  EXPECT_EQ(byte, 42);
  late.join();
}

TEST(Socket, ConnectTimesOutNamingTheAddress) {
  uint16_t port;
  {
    Socket probe = Socket::listen(loopback());
    port = probe.localAddress().port();
  }
  auto start = std::chrono::steady_clock::now();
  try {
    Socket::connect(loopback(port), Deadline::after(300));
    ADD_FAILURE() << "connected to a closed port";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilTimeout);
    std::string m = e.what();
    EXPECT_NE(m.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << m;
    EXPECT_NE(m.find("300 ms"), std::string::npos) << m;
  }
  double took = secondsSince(start);
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 1.5);
}

TEST(Socket, RecvTimesOutNamingThePeer) {
  auto [client, server] = connectedPair();
  uint8_t buf[8];
  auto start = std::chrono::steady_clock::now();
  try {
    server.recvAll(buf, sizeof buf, Deadline::after(200), nullptr, "rank 7");
    ADD_FAILURE() << "received from a silent peer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilTimeout);
    EXPECT_NE(std::string(e.what()).find("rank 7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("200 ms"), std::string::npos) << e.what();
  }
  EXPECT_LT(secondsSince(start), 1.0);
}

TEST(Socket, EofIsARemoteErrorNamingThePeer) {
  auto [client, server] = connectedPair();
  uint8_t two[2] = {1, 2};
  client.sendAll(two, 1, Deadline::after(1000));
  client.reset();
  uint8_t buf[2];
  try {
    server.recvAll(buf, sizeof buf, Deadline::after(5000), nullptr, "rank 3");
    ADD_FAILURE() << "no error at EOF";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilRemoteError);
    EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1 of 2"), std::string::npos) << e.what();
  }
}

// A forked child lets go of coil's sockets (net/socket_registry.h): its
// copy of the descriptor is /dev/null, so the parent's close still ends the
// connection for the peer while the child lives on, and the child's
// shutdown() cannot end the parent's connection.
TEST(Socket, AForkedChildLetsGoOfTheConnection) {
  auto [client, server] = connectedPair();
  int toChild[2];
  ASSERT_EQ(pipe(toChild), 0);
  const pid_t child = fork();
  if (child == 0) {
    struct stat st {};
    const bool devnull = fstat(client.fd(), &st) == 0 && S_ISCHR(st.st_mode);
    client.shutdownBoth();  // must not reach the parent's connection
    // Lives until the parent is done (or gone: EOF), 10 s at most.
    close(toChild[1]);
    pollfd until{toChild[0], POLLIN, 0};
    poll(&until, 1, 10000);
    _exit(devnull ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  // The child's shutdown did not end it: both directions still carry data.
  usleep(50 * 1000);
  uint8_t ping = 7, got = 0;
  client.sendAll(&ping, 1, Deadline::after(5000));
  server.recvAll(&got, 1, Deadline::after(5000));
  EXPECT_EQ(got, 7);
  server.sendAll(&ping, 1, Deadline::after(5000));
  client.recvAll(&got, 1, Deadline::after(5000));
  // With the child still alive, closing here is EOF for the peer at once.
  client.reset();
  const auto t0 = std::chrono::steady_clock::now();
  uint8_t buf;
  EXPECT_THROW(server.recvAll(&buf, 1, Deadline::after(5000), nullptr, "peer"), Error);
  EXPECT_LT(secondsSince(t0), 1.0);
  (void)!write(toChild[1], "x", 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's copy of the socket is not /dev/null";
  close(toChild[0]);
  close(toChild[1]);
}

TEST(Socket, SendingToAClosedPeerFailsWithoutSigpipe) {
  auto [client, server] = connectedPair();
  server.reset();
  std::vector<uint8_t> chunk(1 << 20);
  try {
    // The first send may still be buffered; the peer's reset stops a later one.
    for (int i = 0; i < 64; ++i) client.sendAll(chunk.data(), chunk.size(), Deadline::after(5000),
                                                nullptr, "rank 1");
    ADD_FAILURE() << "64 MiB went to a closed socket";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilRemoteError);
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
}

TEST(Socket, AbortFlagEndsAWaitQuickly) {
  auto [client, server] = connectedPair();
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort.store(true);
  });
  auto start = std::chrono::steady_clock::now();
  uint8_t buf[4];
  try {
    server.recvAll(buf, sizeof buf, Deadline::after(10000), &abort, "rank 2");
    ADD_FAILURE() << "returned without data";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilRemoteError);
    EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
  }
  EXPECT_LT(secondsSince(start), 0.5);
  aborter.join();
}

TEST(Socket, ShutdownWakesABlockedReceiver) {
  auto [client, server] = connectedPair();
  // Lambdas capture structured bindings only from C++20 compilers that
  // implement P1091 (not clang 14, Debian bookworm's): name it through an
  // init-capture.
  std::thread closer([&server = server] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.shutdownBoth();
  });
  uint8_t buf[4];
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(server.recvAll(buf, sizeof buf, Deadline::after(10000)), Error);
  EXPECT_LT(secondsSince(start), 1.0);
  closer.join();
}

TEST(Socket, ListenOnATakenPortIsASystemError) {
  Socket first = Socket::listen(loopback());
  try {
    Socket::listen(first.localAddress());
    ADD_FAILURE() << "two listeners on one port";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilSystemError);
    EXPECT_NE(std::string(e.what()).find(first.localAddress().toString()), std::string::npos);
  }
}

// Every rank sends a large buffer to the next while receiving from the
// previous. Blocking sends would fill every socket buffer and deadlock.
TEST(SendRecvAll, RingOfLargeTransfersDoesNotDeadlock) {
  constexpr int kRanks = 4;
  constexpr size_t kBytes = 8 << 20;
  std::vector<Socket> toNext(kRanks), fromPrev(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    auto [c, s] = connectedPair();
    toNext[r] = std::move(c);
    fromPrev[(r + 1) % kRanks] = std::move(s);
  }
  std::vector<std::vector<uint8_t>> in(kRanks, std::vector<uint8_t>(kBytes));
  auto out = [](int r, size_t i) { return static_cast<uint8_t>(r * 29 + i * 3 + (i >> 12)); };
  auto outcomes = test::runThreads(kRanks, [&](int r) {
    std::vector<uint8_t> mine(kBytes);
    for (size_t i = 0; i < kBytes; ++i) mine[i] = out(r, i);
    sendRecvAll(toNext[r], mine.data(), kBytes, fromPrev[r], in[r].data(), kBytes,
                Deadline::after(20000), nullptr, "next", "prev");
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(outcomes[r].ok) << outcomes[r].message;
    int prev = (r + kRanks - 1) % kRanks;
    for (size_t i = 0; i < kBytes; ++i)
      ASSERT_EQ(in[r][i], out(prev, i)) << "rank " << r << " byte " << i;
  }
}

TEST(SendRecvAll, SameSocketBothWays) {
  constexpr size_t kBytes = 4 << 20;
  auto [a, b] = connectedPair();
  std::vector<uint8_t> fromA(kBytes, 0xA5), fromB(kBytes, 0x5A), gotA(kBytes), gotB(kBytes);
  std::thread other([&, &b = b] {  // init-capture: see ShutdownWakesABlockedReceiver
    sendRecvAll(b, fromB.data(), kBytes, b, gotB.data(), kBytes, Deadline::after(20000), nullptr,
                "a");
  });
  sendRecvAll(a, fromA.data(), kBytes, a, gotA.data(), kBytes, Deadline::after(20000), nullptr,
              "b");
  other.join();
  EXPECT_EQ(gotA, fromB);
  EXPECT_EQ(gotB, fromA);
}

TEST(SendRecvAll, NamesTheSideThatFailed) {
  auto [toClient, toServer] = connectedPair();
  auto [fromClient, fromServer] = connectedPair();
  fromClient.reset();  // the "previous" peer dies
  uint8_t out[4] = {}, in[4];
  try {
    sendRecvAll(toClient, out, sizeof out, fromServer, in, sizeof in, Deadline::after(5000),
                nullptr, "rank 1 (next)", "rank 9 (prev)");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilRemoteError);
    EXPECT_NE(std::string(e.what()).find("rank 9 (prev)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace coil
