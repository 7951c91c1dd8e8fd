// Rendezvous and ring collectives with ranks as threads of this process,
// all on 127.0.0.1: success for several rank counts, and every failure the
// root or the ring must report clearly and promptly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "net/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "core/error.h"
#include "test_util.h"

namespace coil {
namespace {

using test::loopback;
using test::RankOutcome;

constexpr int64_t kTimeoutMs = 15000;

std::string describe(const std::vector<RankOutcome>& outcomes) {
  std::string s;
  for (size_t r = 0; r < outcomes.size(); ++r)
    s += "\n  rank " + std::to_string(r) + ": " + (outcomes[r].ok ? "ok" : outcomes[r].message);
  return s;
}

void expectAllOk(const std::vector<RankOutcome>& outcomes) {
  for (const auto& o : outcomes) ASSERT_TRUE(o.ok) << describe(outcomes);
}

uint16_t freePort() {
  Socket probe = Socket::listen(loopback());
  return probe.localAddress().port();
}

// Every rank checks its view of the group, then gathers a small and a large
// per-rank pattern and meets at barriers.
void exerciseRank(const UniqueIdData& id, int rank, int nranks, size_t largeBytes) {
  auto boot = Bootstrap::create(id, rank, nranks, Deadline::after(kTimeoutMs), nullptr);
  if (boot->rank() != rank || boot->nranks() != nranks)
    fail(coilInternalError, "rank/nranks ", boot->rank(), "/", boot->nranks());
  if (std::memcmp(boot->secret(), id.secret, 16) != 0) fail(coilInternalError, "secret differs");
  if (boot->localAddress().toString() != "127.0.0.1:0")
    fail(coilInternalError, "local address ", boot->localAddress().toString());
  for (size_t bytes : {size_t{1}, size_t{1000}, largeBytes}) {
    std::vector<uint8_t> buf(bytes * static_cast<size_t>(nranks), 0xEE);
    test::fillOwnBlock(buf, rank, bytes);
    boot->allGather(buf.data(), bytes);
    int64_t wrong = test::firstWrongByte(buf, nranks, bytes);
    if (wrong >= 0) fail(coilInternalError, "allGather of ", bytes, " B: wrong byte at ", wrong);
  }
  for (int i = 0; i < 3; ++i) boot->barrier();
}

class RendezvousThreads : public testing::TestWithParam<int> {
 protected:
  test::EnvGuard env_{test::bootstrapVars()};
};

TEST_P(RendezvousThreads, AllGatherAndBarrier) {
  const int nranks = GetParam();
  UniqueIdData id = startRoot(loopback(), kTimeoutMs);
  EXPECT_FALSE(id.rootHostedByRank0);
  // 4 MiB per rank shows that a ring of ranks all sending at once does not
  // deadlock on full socket buffers.
  auto outcomes = test::runThreads(nranks, [&](int r) { exerciseRank(id, r, nranks, 4 << 20); });
  expectAllOk(outcomes);
}

INSTANTIATE_TEST_SUITE_P(RankCounts, RendezvousThreads, testing::Values(1, 2, 3, 5, 8));

TEST(Rendezvous, IdThroughTheByteEncodingWorks) {
  test::EnvGuard env(test::bootstrapVars());
  coilUniqueId wireId = encodeUniqueId(startRoot(loopback(), kTimeoutMs));
  auto outcomes =
      test::runThreads(3, [&](int r) { exerciseRank(decodeUniqueId(wireId), r, 3, 4096); });
  expectAllOk(outcomes);
}

TEST(Rendezvous, Rank0HostsAFixedRoot) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = uniqueIdForFixedRoot(loopback(freePort()), "fixed-root-test");
  // Ranks 1 and 2 start first: they retry until rank 0 has started the root.
  auto outcomes = test::runThreads(3, [&](int r) {
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    exerciseRank(id, r, 3, 4096);
  });
  expectAllOk(outcomes);
}

TEST(Rendezvous, SocketIfnameChoosesTheListenAddress) {
  test::EnvGuard env(test::bootstrapVars());
  env.set("COIL_SOCKET_IFNAME", "lo");
  UniqueIdData id = startRoot(loopback(), kTimeoutMs);
  expectAllOk(test::runThreads(2, [&](int r) { exerciseRank(id, r, 2, 4096); }));
}

TEST(Rendezvous, TakenRootPortIsAClearSystemError) {
  test::EnvGuard env(test::bootstrapVars());
  Socket squatter = Socket::listen(loopback());
  const SocketAddress taken = squatter.localAddress();
  try {
    startRoot(taken, 1000);
    ADD_FAILURE() << "root started on a taken port";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilSystemError);
    EXPECT_NE(std::string(e.what()).find(taken.toString()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
  // Rank 0 of a fixed root reports it the same way.
  UniqueIdData id = uniqueIdForFixedRoot(taken, "");
  try {
    Bootstrap::create(id, 0, 2, Deadline::after(1000), nullptr);
    ADD_FAILURE() << "rank 0 joined although its root could not start";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilSystemError);
  }
}

TEST(Rendezvous, InvalidArguments) {
  UniqueIdData id = uniqueIdForFixedRoot(loopback(1), "");
  for (auto [rank, nranks] : {std::pair{0, 0}, {-1, 2}, {2, 2}}) {
    try {
      Bootstrap::create(id, rank, nranks, Deadline::after(100), nullptr);
      ADD_FAILURE() << rank << "/" << nranks;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), coilInvalidArgument) << e.what();
    }
  }
}

TEST(Rendezvous, StrangersAtTheRootAreRefused) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(loopback(), kTimeoutMs);

  // A silent stranger, one that sends garbage, one with the wrong secret.
  Socket silent = Socket::connect(id.root, Deadline::after(5000));
  Socket garbage = Socket::connect(id.root, Deadline::after(5000));
  std::string junk(200, '\x42');
  garbage.sendAll(junk.data(), junk.size(), Deadline::after(5000));
  coilResult_t wrongSecretResult = coilSuccess;
  std::thread impostor([&] {
    UniqueIdData fake = id;
    fake.secret[3] ^= 0x40;
    try {
      Socket s = Socket::connect(id.root, Deadline::after(5000));
      auth::proveAsClient(s, fake.secret, "root", Deadline::after(5000));
    } catch (const Error& e) {
      wrongSecretResult = e.code();
    }
  });
  impostor.join();

  auto start = std::chrono::steady_clock::now();
  auto outcomes = test::runThreads(3, [&](int r) { exerciseRank(id, r, 3, 65536); });
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expectAllOk(outcomes);
  EXPECT_LT(took, 3.0) << "strangers delayed the rendezvous";
  EXPECT_EQ(wrongSecretResult, coilRemoteError);
  uint8_t buf[64];
  EXPECT_THROW(garbage.recvAll(buf, sizeof buf, Deadline::after(2000)), Error);
}

TEST(Rendezvous, AnImpostorRankIsRefused) {
  // A client with the wrong secret pretending to be rank 1: the real ranks
  // still complete, the impostor is dropped.
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(loopback(), kTimeoutMs);
  UniqueIdData fake = id;
  fake.secret[0] ^= 1;
  fake.rootHostedByRank0 = false;
  coilResult_t impostor = coilSuccess;
  std::thread t([&] {
    try {
      Bootstrap::create(fake, 1, 2, Deadline::after(3000), nullptr);
    } catch (const Error& e) {
      impostor = e.code();
    }
  });
  t.join();
  EXPECT_EQ(impostor, coilRemoteError);
  expectAllOk(test::runThreads(2, [&](int r) { exerciseRank(id, r, 2, 4096); }));
}

void expectAllFailWith(const std::vector<RankOutcome>& outcomes, coilResult_t code,
                       const std::string& text) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_FALSE(outcomes[r].ok) << "rank " << r << " succeeded";
    EXPECT_EQ(outcomes[r].code, code) << describe(outcomes);
    EXPECT_NE(outcomes[r].message.find(text), std::string::npos) << describe(outcomes);
  }
}

TEST(Rendezvous, MismatchedNranksIsInvalidUsage) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(loopback(), kTimeoutMs);
  auto outcomes = test::runThreads(3, [&](int r) {
    Bootstrap::create(id, r, r == 2 ? 4 : 3, Deadline::after(kTimeoutMs), nullptr);
  });
  expectAllFailWith(outcomes, coilInvalidUsage, "ranks disagree on nranks");
}

TEST(Rendezvous, DuplicateRankIsInvalidUsage) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(loopback(), kTimeoutMs);
  auto outcomes = test::runThreads(3, [&](int r) {
    Bootstrap::create(id, r == 2 ? 1 : r, 3, Deadline::after(kTimeoutMs), nullptr);
  });
  expectAllFailWith(outcomes, coilInvalidUsage, "rank 1 joined twice");
}

TEST(Rendezvous, TimeoutNamesTheMissingRank) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(loopback(), 1000);
  auto outcomes = test::runThreads(2, [&](int r) {
    Bootstrap::create(id, r, 3, Deadline::after(1000), nullptr);
  });
  expectAllFailWith(outcomes, coilTimeout, "missing rank 2");
  for (const auto& o : outcomes) {
    EXPECT_GE(o.seconds, 0.8);
    EXPECT_LT(o.seconds, 3.0);
  }
}

TEST(Rendezvous, TimeoutWithoutARoot) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = uniqueIdForFixedRoot(loopback(freePort()), "");
  auto outcomes = test::runThreads(1, [&](int) {
    Bootstrap::create(id, 1, 2, Deadline::after(500), nullptr);  // rank 0 never comes
  });
  expectAllFailWith(outcomes, coilTimeout, "rendezvous root at " + id.root.toString());
  EXPECT_LT(outcomes[0].seconds, 2.0);
}

TEST(Rendezvous, ClosedPeerFailsTheOthersPromptly) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(loopback(), kTimeoutMs);
  auto outcomes = test::runThreads(4, [&](int r) {
    auto boot = Bootstrap::create(id, r, 4, Deadline::after(kTimeoutMs), nullptr);
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      boot->close();
      boot->close();  // idempotent
      return;
    }
    boot->setDeadline(Deadline::after(20000));
    std::vector<uint8_t> buf(4 * (1 << 20));
    auto start = std::chrono::steady_clock::now();
    try {
      boot->allGather(buf.data(), 1 << 20);
    } catch (const Error& e) {
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (e.code() != coilRemoteError) throw;
      if (took > 2.0) fail(coilInternalError, "failure took ", took, " s: ", e.what());
      if (std::string(e.what()).find("rank") == std::string::npos)
        fail(coilInternalError, "no peer named: ", e.what());
      return;
    }
    fail(coilInternalError, "allGather completed without rank 2");
  });
  expectAllOk(outcomes);
}

// A rank that joins the root and vanishes before the ring forms (a kill -9
// at that moment): its listener is gone, so its previous neighbour's
// connect is refused, and the failure must walk the ring to every other
// rank: one waiting in the ring for the vanished rank to connect, one
// already in an allGather waiting on that one. Each fails in seconds.
TEST(Rendezvous, ARankThatVanishesAfterJoiningFailsEveryoneSoon) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(loopback(), kTimeoutMs);
  constexpr int kRanks = 4, kGone = 1;
  auto outcomes = test::runThreads(kRanks, [&](int r) {
    if (r == kGone) {
      // Join with a listener address nobody listens on, then leave.
      Socket listener = Socket::listen(loopback());
      wire::Hello hello;
      hello.rank = r;
      hello.nranks = kRanks;
      hello.listener = listener.localAddress();
      listener.reset();
      Socket root = Socket::connect(id.root, Deadline::after(kTimeoutMs));
      auth::proveAsClient(root, id.secret, "root", Deadline::after(kTimeoutMs));
      uint8_t bytes[wire::kHelloBytes];
      wire::putHello(bytes, hello);
      root.sendAll(bytes, sizeof bytes, Deadline::after(kTimeoutMs));
      // Take the address table like a live rank, then vanish.
      uint8_t header[wire::kReplyHeaderBytes];
      root.recvAll(header, sizeof header, Deadline::after(kTimeoutMs));
      wire::ReplyHeader reply;
      if (!wire::getReplyHeader(header, &reply)) fail(coilInternalError, "bad reply");
      std::vector<uint8_t> table(reply.length);
      root.recvAll(table.data(), table.size(), Deadline::after(kTimeoutMs));
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      auto boot = Bootstrap::create(id, r, kRanks, Deadline::after(60000), nullptr);
      std::vector<int32_t> all(kRanks);
      boot->allGather(all.data(), sizeof(int32_t));
    } catch (const Error& e) {
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (e.code() == coilTimeout || took > 5.0)
        fail(coilInternalError, "rank ", r, " failed after ", took, " s: ", e.what());
      return;
    }
    fail(coilInternalError, "rank ", r, " completed without rank ", kGone);
  });
  for (int r = 0; r < kRanks; ++r)
    EXPECT_TRUE(outcomes[static_cast<size_t>(r)].ok) << "rank " << r << ": "
                                                     << outcomes[static_cast<size_t>(r)].message;
}

TEST(Rendezvous, AbortFlagEndsAnAllGather) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(loopback(), kTimeoutMs);
  std::atomic<bool> abort0{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // ranks are in allGather
    abort0.store(true);
  });
  auto outcomes = test::runThreads(3, [&](int r) {
    auto boot =
        Bootstrap::create(id, r, 3, Deadline::after(kTimeoutMs), r == 0 ? &abort0 : nullptr);
    if (r == 2) {  // never joins the allGather; leaves once the others have failed
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return;
    }
    std::vector<uint8_t> buf(3 * 1024);
    auto start = std::chrono::steady_clock::now();
    try {
      boot->allGather(buf.data(), 1024);
    } catch (const Error& e) {
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (e.code() != coilRemoteError || took > 1.0)
        fail(coilInternalError, "after ", took, " s: ", e.what());
      if (r == 0 && std::string(e.what()).find("aborted") == std::string::npos)
        fail(coilInternalError, "rank 0 not told it aborted: ", e.what());
      return;
    }
    fail(coilInternalError, "allGather completed without rank 2");
  });
  aborter.join();
  expectAllOk(outcomes);
}

TEST(Rendezvous, OperationsUseTheirDeadline) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(loopback(), kTimeoutMs);
  auto outcomes = test::runThreads(2, [&](int r) {
    auto boot = Bootstrap::create(id, r, 2, Deadline::after(kTimeoutMs), nullptr);
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      return;
    }
    boot->setDeadline(Deadline::after(300));
    auto start = std::chrono::steady_clock::now();
    try {
      boot->barrier();
    } catch (const Error& e) {
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (e.code() != coilTimeout || took > 0.8 ||
          std::string(e.what()).find("300 ms") == std::string::npos)
        fail(coilInternalError, "after ", took, " s: ", e.what());
      return;
    }
    fail(coilInternalError, "barrier completed alone");
  });
  expectAllOk(outcomes);
}

}  // namespace
}  // namespace coil

namespace coil {
namespace {

// Rank 0 of a launch hosts the root at a fixed address (COIL_COMM_ID or
// MASTER_ADDR:MASTER_PORT). When that port is taken the error says where
// the address came from and how to choose another.
TEST(Rendezvous, AFixedRootAddressInUseSaysHowToChooseAnother) {
  test::EnvGuard env(test::bootstrapVars());
  Socket squatter = Socket::listen(loopback());
  const UniqueIdData id = uniqueIdForFixedRoot(squatter.localAddress(), "job");
  std::string message;
  try {
    Bootstrap::create(id, 0, 2, Deadline::after(5000), nullptr);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilSystemError);
    message = e.what();
  }
  EXPECT_NE(message.find(squatter.localAddress().toString()), std::string::npos) << message;
  EXPECT_NE(message.find("COIL_COMM_ID"), std::string::npos) << message;
  EXPECT_NE(message.find("--master-port"), std::string::npos) << message;
  // Under srun without MASTER_PORT the port came from the job and step ids.
  EXPECT_NE(message.find("SLURM_JOB_ID and SLURM_STEP_ID"), std::string::npos) << message;
}

// A rank died after it joined, and another process now listens on its port
// without ever answering (ports are reused; under load it happens): its
// ring neighbour connects there and must not wait for its whole deadline
// for a handshake a real rank answers in milliseconds.
TEST(Rendezvous, ARingNeighbourThatNeverAnswersTheHandshakeFailsSoon) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(loopback(), 60000);
  Socket squatter = Socket::listen(loopback());  // accepts into its backlog, never answers
  std::thread fakeRank([&] {
    // Rank 1 joins the root with the squatter's address as its ring listener.
    Socket s = Socket::connect(id.root, Deadline::after(5000));
    auth::proveAsClient(s, id.secret, "root", Deadline::after(5000));
    wire::Hello hello;
    hello.rank = 1;
    hello.nranks = 2;
    hello.listener = squatter.localAddress();
    uint8_t bytes[wire::kHelloBytes];
    wire::putHello(bytes, hello);
    s.sendAll(bytes, sizeof bytes, Deadline::after(5000));
    uint8_t answer[64];
    try {
      s.recvAll(answer, sizeof answer, Deadline::after(20000));
    } catch (const Error&) {
    }
  });
  const auto start = std::chrono::steady_clock::now();
  coilResult_t code = coilSuccess;
  std::string message;
  try {
    Bootstrap::create(id, 0, 2, Deadline::after(60000), nullptr);
  } catch (const Error& e) {
    code = e.code();
    message = e.what();
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fakeRank.join();
  EXPECT_EQ(code, coilRemoteError) << message;
  EXPECT_NE(message.find("did not answer"), std::string::npos) << message;
  EXPECT_LT(took, 5.0) << "waited for the 60 s deadline instead";
}

}  // namespace
}  // namespace coil
