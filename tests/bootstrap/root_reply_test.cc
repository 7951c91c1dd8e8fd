// What a rank makes of its rendezvous root's answer when the root is hostile
// or broken: the result code it reports must be one coil defines for that
// situation (an unknown or unexpected code is coilRemoteError), and the
// root's text reaches coilGetLastError only as bounded, printable ASCII
// (no terminal escape sequences, no forged log lines, no invalid UTF-8).
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/acceptor.h"
#include "net/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "core/error.h"
#include "test_util.h"

namespace coil {
namespace {

// Far more than any honest message needs, far less than the 4 KiB the wire allows.
constexpr size_t kMaxMessageBytes = 1024;

/// A root that knows the secret (so the rank trusts the connection) and
/// answers the first rank with `code`, a header claiming `length` bytes, and
/// `payload`.
test::RankOutcome joinFakeRoot(uint32_t code, const std::string& payload,
                               std::optional<uint32_t> length = std::nullopt) {
  test::EnvGuard env(test::bootstrapVars());
  Socket listener = Socket::listen(test::loopback());
  UniqueIdData id{};
  auth::randomBytes(id.secret, sizeof id.secret);
  id.root = listener.localAddress();
  id.rootHostedByRank0 = false;
  std::thread root([&] {
    AuthenticatedAcceptor acceptor(listener, id.secret, "root", wire::kHelloBytes, "fake root");
    auto a = acceptor.next(Deadline::after(5000));
    if (!a) return;
    std::vector<uint8_t> frame(wire::kReplyHeaderBytes + payload.size());
    wire::putReplyHeader(frame.data(),
                         {code, length.value_or(static_cast<uint32_t>(payload.size()))});
    std::memcpy(frame.data() + wire::kReplyHeaderBytes, payload.data(), payload.size());
    try {
      a->socket.sendAll(frame.data(), frame.size(), Deadline::after(5000));
    } catch (const Error&) {
      // The rank may hang up before reading everything; that is its right.
    }
  });
  auto outcomes = test::runThreads(1, [&](int) {
    Bootstrap::create(id, 0, 2, Deadline::after(5000), nullptr);
  });
  root.join();
  return outcomes[0];
}

/// Printable ASCII only, and bounded.
void expectClean(const std::string& message) {
  EXPECT_LE(message.size(), kMaxMessageBytes) << message.substr(0, 200) << "...";
  for (size_t i = 0; i < message.size(); ++i) {
    const auto c = static_cast<unsigned char>(message[i]);
    if (c < 0x20 || c > 0x7e) {
      ADD_FAILURE() << "byte 0x" << std::hex << int{c} << " at " << std::dec << i << " in: "
                    << message.substr(0, 300);
      return;
    }
  }
}

const std::string kHostileText =
    "disk on fire\x1b[2J\x1b]0;pwned\x07\r\nhost:1:0 coil WARN BOOT forged line\n\xff\xfe\xc3\xa9";

TEST(RootReply, UnknownCodeIsARemoteErrorWithCleanText) {
  test::RankOutcome o = joinFakeRoot(12345, kHostileText);
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.code, coilRemoteError) << o.message;
  EXPECT_NE(o.message.find("disk on fire"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("forged line"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("12345"), std::string::npos) << o.message;
  expectClean(o.message);
}

TEST(RootReply, CodesTheRootNeverSendsAreRemoteErrors) {
  for (coilResult_t code : {coilUnhandledCudaError, coilSystemError, coilInternalError,
                            coilInvalidArgument, coilInProgress}) {
    test::RankOutcome o = joinFakeRoot(static_cast<uint32_t>(code), "something broke");
    ASSERT_FALSE(o.ok);
    EXPECT_EQ(o.code, coilRemoteError) << "root sent " << code << ": " << o.message;
    EXPECT_NE(o.message.find("something broke"), std::string::npos) << o.message;
  }
}

TEST(RootReply, TheRootsOwnVerdictsKeepTheirCodeButNotTheirEscapes) {
  // A root reports a conflict (coilInvalidUsage) or missing ranks
  // (coilTimeout): these codes tell the user what to fix, so they stay.
  for (coilResult_t code : {coilInvalidUsage, coilTimeout}) {
    test::RankOutcome o = joinFakeRoot(static_cast<uint32_t>(code), kHostileText);
    ASSERT_FALSE(o.ok);
    EXPECT_EQ(o.code, code) << o.message;
    EXPECT_NE(o.message.find("disk on fire"), std::string::npos) << o.message;
    expectClean(o.message);
  }
}

TEST(RootReply, LongTextIsCut) {
  std::string text;
  while (text.size() < wire::kMaxErrorTextBytes) text += "spam\x1b[31m ";
  text.resize(wire::kMaxErrorTextBytes);
  test::RankOutcome o = joinFakeRoot(coilTimeout, text);
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.code, coilTimeout) << o.message.substr(0, 200);
  EXPECT_NE(o.message.find("spam"), std::string::npos);
  expectClean(o.message);
}

TEST(RootReply, OversizedTextIsAMalformedAnswer) {
  test::RankOutcome o = joinFakeRoot(coilInvalidUsage, std::string(100 * 1024, '\x1b'));
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.code, coilRemoteError) << o.message.substr(0, 200);
  EXPECT_NE(o.message.find("malformed"), std::string::npos) << o.message.substr(0, 200);
  expectClean(o.message);
}

TEST(RootReply, SuccessWithGarbageIsARemoteError) {
  // The right length for 2 ranks' addresses, but not addresses.
  test::RankOutcome o = joinFakeRoot(coilSuccess, std::string(2 * wire::kAddressBytes, '\xff'));
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.code, coilRemoteError) << o.message;
  expectClean(o.message);
  // The wrong length for a table.
  o = joinFakeRoot(coilSuccess, "\x1b[2Jnot a table");
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.code, coilRemoteError) << o.message;
  expectClean(o.message);
}

}  // namespace
}  // namespace coil
