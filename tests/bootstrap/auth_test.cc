// The challenge-response handshake, and the poll-driven acceptor that runs
// it for many connections at once while refusing strangers.
#include "net/auth.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "net/acceptor.h"
#include "core/error.h"
#include "test_util.h"

namespace coil {
namespace {

using test::loopback;

struct Pair {
  Socket listener, client, server;
};
Pair connectedPair() {
  Pair p;
  p.listener = Socket::listen(loopback());
  p.client = Socket::connect(p.listener.localAddress(), Deadline::after(5000));
  p.server = p.listener.accept(Deadline::after(5000));
  return p;
}

const uint8_t kSecret[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
const uint8_t kOtherSecret[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17};

// Runs both sides; returns {client error code, server error code} (coilSuccess: none).
std::pair<coilResult_t, coilResult_t> handshake(const uint8_t* clientSecret,
                                                const char* clientPurpose,
                                                const uint8_t* serverSecret,
                                                const char* serverPurpose) {
  Pair p = connectedPair();
  coilResult_t serverCode = coilSuccess;
  std::thread server([&] {
    try {
      auth::verifyAsServer(p.server, serverSecret, serverPurpose, Deadline::after(5000));
    } catch (const Error& e) {
      serverCode = e.code();
      p.server.reset();  // as a real server does: drop the stranger
    }
  });
  coilResult_t clientCode = coilSuccess;
  try {
    auth::proveAsClient(p.client, clientSecret, clientPurpose, Deadline::after(5000));
  } catch (const Error& e) {
    clientCode = e.code();
  }
  server.join();
  return {clientCode, serverCode};
}

TEST(Auth, SameSecretAndPurposeSucceeds) {
  auto [c, s] = handshake(kSecret, "ring", kSecret, "ring");
  EXPECT_EQ(c, coilSuccess);
  EXPECT_EQ(s, coilSuccess);
}

TEST(Auth, WrongSecretFailsOnBothSides) {
  auto [c, s] = handshake(kOtherSecret, "ring", kSecret, "ring");
  EXPECT_EQ(c, coilRemoteError);
  EXPECT_EQ(s, coilRemoteError);
}

TEST(Auth, ProofForAnotherPurposeIsRejected) {
  auto [c, s] = handshake(kSecret, "root", kSecret, "ring");
  EXPECT_EQ(c, coilRemoteError);
  EXPECT_EQ(s, coilRemoteError);
}

TEST(Auth, ClientRejectsAServerThatCannotProveItself) {
  // A fake server: sends a nonce, reads the proof, answers with junk.
  Pair p = connectedPair();
  std::thread fake([&] {
    uint8_t nonce[auth::kNonceBytes] = {9};
    uint8_t proof[auth::kClientProofBytes];
    uint8_t junk[auth::kMacBytes] = {7};
    p.server.sendAll(nonce, sizeof nonce, Deadline::after(5000));
    p.server.recvAll(proof, sizeof proof, Deadline::after(5000));
    p.server.sendAll(junk, sizeof junk, Deadline::after(5000));
  });
  try {
    auth::proveAsClient(p.client, kSecret, "ring", Deadline::after(5000));
    ADD_FAILURE() << "accepted a server without the secret";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilRemoteError);
    EXPECT_NE(std::string(e.what()).find("failed to prove"), std::string::npos) << e.what();
  }
  fake.join();
}

TEST(Auth, SilentServerTimesOut) {
  Pair p = connectedPair();
  try {
    auth::proveAsClient(p.client, kSecret, "ring", Deadline::after(200));
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilTimeout);
  }
}

TEST(Auth, CheckClientProofRejectsAnyAlteredByte) {
  // Build a valid proof through the real client against a recording server.
  Pair p = connectedPair();
  uint8_t nonce[auth::kNonceBytes];
  auth::randomBytes(nonce, sizeof nonce);
  uint8_t proof[auth::kClientProofBytes];
  std::thread client([&] {
    try {
      auth::proveAsClient(p.client, kSecret, "tcp-data", Deadline::after(2000));
    } catch (const Error&) {
      // The recording server never answers; only the proof matters here.
    }
  });
  p.server.sendAll(nonce, sizeof nonce, Deadline::after(5000));
  p.server.recvAll(proof, sizeof proof, Deadline::after(5000));
  p.server.reset();
  client.join();

  uint8_t reply[auth::kMacBytes];
  EXPECT_TRUE(auth::checkClientProof(kSecret, "tcp-data", nonce, proof, reply));
  for (size_t i = 0; i < sizeof proof; ++i) {
    proof[i] ^= 0x01;
    EXPECT_FALSE(auth::checkClientProof(kSecret, "tcp-data", nonce, proof, reply)) << i;
    proof[i] ^= 0x01;
  }
  nonce[0] ^= 0x80;
  EXPECT_FALSE(auth::checkClientProof(kSecret, "tcp-data", nonce, proof, reply));
}

TEST(Auth, RandomBytesDiffer) {
  uint8_t a[32], b[32];
  auth::randomBytes(a, sizeof a);
  auth::randomBytes(b, sizeof b);
  EXPECT_NE(std::memcmp(a, b, sizeof a), 0);
}

// Connects and proves with `secret`, then sends `hello`; returns the socket.
Socket honestClient(const SocketAddress& at, const uint8_t* secret, const char* purpose,
                    const std::string& hello) {
  Socket s = Socket::connect(at, Deadline::after(5000));
  auth::proveAsClient(s, secret, purpose, Deadline::after(5000));
  s.sendAll(hello.data(), hello.size(), Deadline::after(5000));
  return s;
}

// True when the acceptor closed `s` (EOF or reset) within `ms`.
bool closedByPeer(Socket& s, int ms) {
  uint8_t buf[64];
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    try {
      s.recvAll(buf, 1, Deadline::after(50));
    } catch (const Error& e) {
      if (e.code() == coilRemoteError) return true;
    }
  }
  return false;
}

TEST(AuthenticatedAcceptor, RefusesStrangersWhileServingTheHonest) {
  Socket listener = Socket::listen(loopback());
  const SocketAddress at = listener.localAddress();
  AuthenticatedAcceptor acceptor(listener, kSecret, "root", 5, "test listener",
                                 /*handshakeMs=*/1000);

  // Strangers first: silent, garbage, wrong secret, wrong purpose, early close.
  Socket silent = Socket::connect(at, Deadline::after(5000));
  Socket garbage = Socket::connect(at, Deadline::after(5000));
  std::string junk(100, 'x');
  garbage.sendAll(junk.data(), junk.size(), Deadline::after(5000));
  Socket quitter = Socket::connect(at, Deadline::after(5000));
  quitter.reset();
  coilResult_t wrongSecret = coilSuccess, wrongPurpose = coilSuccess;
  std::thread liars([&] {
    try {
      honestClient(at, kOtherSecret, "root", "hello");
    } catch (const Error& e) {
      wrongSecret = e.code();
    }
    try {
      honestClient(at, kSecret, "ring", "hello");
    } catch (const Error& e) {
      wrongPurpose = e.code();
    }
  });
  Socket honest;
  std::thread good([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    honest = honestClient(at, kSecret, "root", "HELLO");
  });

  auto start = std::chrono::steady_clock::now();
  auto accepted = acceptor.next(Deadline::after(5000));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  good.join();
  liars.join();
  ASSERT_TRUE(accepted.has_value());
  EXPECT_EQ(std::string(accepted->hello.begin(), accepted->hello.end()), "HELLO");
  EXPECT_EQ(accepted->peer.toString(), honest.localAddress().toString());
  EXPECT_LT(took, 0.8) << "the silent stranger held up the honest client";
  EXPECT_EQ(wrongSecret, coilRemoteError);
  EXPECT_EQ(wrongPurpose, coilRemoteError);
  EXPECT_TRUE(closedByPeer(garbage, 2000));

  // Nobody else completes; the silent stranger is dropped at its handshake deadline.
  EXPECT_FALSE(acceptor.next(Deadline::after(1200)).has_value());
  uint8_t nonce[auth::kNonceBytes];
  silent.recvAll(nonce, sizeof nonce, Deadline::after(1000));  // the challenge it ignored
  EXPECT_TRUE(closedByPeer(silent, 1000));

  // The accepted connection is usable.
  uint8_t byte = 5;
  accepted->socket.sendAll(&byte, 1, Deadline::after(1000));
  honest.recvAll(&byte, 1, Deadline::after(1000));
  EXPECT_EQ(byte, 5);
}

TEST(AuthenticatedAcceptor, StopEndsTheWait) {
  Socket listener = Socket::listen(loopback());
  AuthenticatedAcceptor acceptor(listener, kSecret, "ring", 4, "test listener");
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop.store(true);
  });
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(acceptor.next(Deadline::after(10000), [&] { return stop.load(); }).has_value());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
  stopper.join();
}

}  // namespace
}  // namespace coil
