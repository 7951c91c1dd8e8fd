// coilUniqueId encoding, fixed-root ids and makeUniqueId (coilGetUniqueId).
#include <gtest/gtest.h>

#include <cstring>

#include "bootstrap/bootstrap.h"
#include "net/sha256.h"
#include "bootstrap/wire.h"
#include "core/error.h"
#include "test_util.h"

namespace coil {
namespace {

using test::loopback;

UniqueIdData sampleData(const std::string& root, bool hosted) {
  UniqueIdData d;
  d.root = SocketAddress::parse(root);
  for (int i = 0; i < 16; ++i) d.secret[i] = static_cast<uint8_t>(0xF0 ^ (i * 17));
  d.nonce = 0x0123456789ABCDEFull;
  d.rootHostedByRank0 = hosted;
  return d;
}

void expectSame(const UniqueIdData& a, const UniqueIdData& b) {
  EXPECT_EQ(a.root.toString(), b.root.toString());
  EXPECT_EQ(a.root.family(), b.root.family());
  EXPECT_EQ(std::memcmp(a.secret, b.secret, sizeof a.secret), 0);
  EXPECT_EQ(a.nonce, b.nonce);
  EXPECT_EQ(a.rootHostedByRank0, b.rootHostedByRank0);
}

TEST(UniqueId, RoundTrips) {
  for (const char* root : {"127.0.0.1:29500", "10.0.0.7:1", "[::1]:65535", "[fd00::2]:80"})
    for (bool hosted : {false, true}) {
      UniqueIdData d = sampleData(root, hosted);
      coilUniqueId id = encodeUniqueId(d);
      expectSame(decodeUniqueId(id), d);
    }
}

void expectRejected(const coilUniqueId& id, const std::string& why) {
  try {
    decodeUniqueId(id);
    ADD_FAILURE() << "accepted: " << why;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilInvalidArgument) << why;
    EXPECT_NE(std::string(e.what()).find("coilUniqueId"), std::string::npos) << e.what();
  }
}

TEST(UniqueId, RejectsGarbage) {
  coilUniqueId zeros;
  std::memset(&zeros, 0, sizeof zeros);
  expectRejected(zeros, "all zero");
  coilUniqueId ones;
  std::memset(&ones, 0xff, sizeof ones);
  expectRejected(ones, "all ones");

  const coilUniqueId good = encodeUniqueId(sampleData("127.0.0.1:29500", false));
  for (size_t i = 0; i < sizeof good.internal; ++i) {
    coilUniqueId bad = good;
    bad.internal[i] ^= 0x10;
    expectRejected(bad, "byte " + std::to_string(i) + " flipped");
  }
}

TEST(UniqueId, NamesABadMagicAndVersion) {
  coilUniqueId id = encodeUniqueId(sampleData("127.0.0.1:29500", false));
  coilUniqueId badMagic = id;
  badMagic.internal[0] ^= 1;
  try {
    decodeUniqueId(badMagic);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("magic"), std::string::npos) << e.what();
  }
  coilUniqueId badVersion = id;
  wire::putU16(reinterpret_cast<uint8_t*>(badVersion.internal) + 4, 7);
  try {
    decodeUniqueId(badVersion);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 7"), std::string::npos) << e.what();
  }
}

// The derivation written out independently: SHA-256 over length-prefixed
// fields "coil-fixed-root", COIL_SECRET, root text, job key.
Sha256Digest expectedDigest(const std::string& secretEnv, const std::string& root,
                            const std::string& job) {
  Sha256 h;
  for (const std::string& f : {std::string("coil-fixed-root"), secretEnv, root, job}) {
    uint8_t len[4] = {static_cast<uint8_t>(f.size() >> 24), static_cast<uint8_t>(f.size() >> 16),
                      static_cast<uint8_t>(f.size() >> 8), static_cast<uint8_t>(f.size())};
    h.update(len, 4);
    h.update(f);
  }
  return h.finish();
}

TEST(UniqueId, FixedRootSecretIsDerivedDeterministically) {
  test::EnvGuard env(test::bootstrapVars());
  const SocketAddress root = SocketAddress::parse("127.0.0.1:29501");
  UniqueIdData a = uniqueIdForFixedRoot(root, "job-7");
  UniqueIdData b = uniqueIdForFixedRoot(root, "job-7");
  expectSame(a, b);
  EXPECT_TRUE(a.rootHostedByRank0);
  EXPECT_EQ(a.root.toString(), "127.0.0.1:29501");
  Sha256Digest d = expectedDigest("", "127.0.0.1:29501", "job-7");
  EXPECT_EQ(std::memcmp(a.secret, d.data(), 16), 0);
  EXPECT_EQ(a.nonce, wire::getU64(d.data() + 16));

  UniqueIdData otherJob = uniqueIdForFixedRoot(root, "job-8");
  UniqueIdData otherRoot = uniqueIdForFixedRoot(SocketAddress::parse("127.0.0.1:29502"), "job-7");
  EXPECT_NE(std::memcmp(a.secret, otherJob.secret, 16), 0);
  EXPECT_NE(std::memcmp(a.secret, otherRoot.secret, 16), 0);
  EXPECT_NE(a.nonce, otherJob.nonce);

  env.set("COIL_SECRET", "correct horse battery staple");
  UniqueIdData withSecret = uniqueIdForFixedRoot(root, "job-7");
  EXPECT_NE(std::memcmp(a.secret, withSecret.secret, 16), 0);
  Sha256Digest ds = expectedDigest("correct horse battery staple", "127.0.0.1:29501", "job-7");
  EXPECT_EQ(std::memcmp(withSecret.secret, ds.data(), 16), 0);
}

TEST(UniqueId, CommIdGivesAFixedRootWithoutStartingOne) {
  test::EnvGuard env(test::bootstrapVars());
  uint16_t port;
  {
    Socket probe = Socket::listen(loopback());
    port = probe.localAddress().port();
  }
  env.set("COIL_COMM_ID", "127.0.0.1:" + std::to_string(port));
  UniqueIdData id = makeUniqueId();
  EXPECT_TRUE(id.rootHostedByRank0);
  expectSame(id, uniqueIdForFixedRoot(loopback(port), ""));
  // Nothing listens there: rank 0 will host the root, not coilGetUniqueId.
  EXPECT_THROW(Socket::connect(loopback(port), Deadline::after(100)), Error);

  env.set("COIL_COMM_ID", "not an address");
  try {
    makeUniqueId();
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("COIL_COMM_ID"), std::string::npos) << e.what();
  }
}

TEST(UniqueId, MakeUniqueIdStartsARootOnTheChosenInterface) {
  test::EnvGuard env(test::bootstrapVars());
  env.set("COIL_SOCKET_IFNAME", "lo");
  env.set("COIL_TIMEOUT_MS", "5000");
  UniqueIdData id = makeUniqueId();
  EXPECT_FALSE(id.rootHostedByRank0);
  EXPECT_EQ(id.root.family(), AF_INET);
  EXPECT_NE(id.root.port(), 0);
  EXPECT_EQ(id.root.toString(), "127.0.0.1:" + std::to_string(id.root.port()));
  // The root is live: a one-rank rendezvous completes (and ends the root).
  auto boot = Bootstrap::create(decodeUniqueId(encodeUniqueId(id)), 0, 1, Deadline::after(5000),
                                nullptr);
  EXPECT_EQ(boot->nranks(), 1);
  EXPECT_EQ(boot->localAddress().toString(), "127.0.0.1:0");

  UniqueIdData again = makeUniqueId();
  EXPECT_NE(std::memcmp(id.secret, again.secret, 16), 0) << "two ids share a secret";
  auto boot2 = Bootstrap::create(again, 0, 1, Deadline::after(5000), nullptr);
}

}  // namespace
}  // namespace coil
