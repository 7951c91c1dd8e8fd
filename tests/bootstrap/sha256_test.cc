// SHA-256 against FIPS 180-4 / NIST examples (plus lengths around the
// padding boundaries, digests computed with Python's hashlib), HMAC-SHA-256
// against RFC 4231.
#include "net/sha256.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace coil {
namespace {

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}
std::string hex(const Sha256Digest& d) { return hex(d.data(), d.size()); }
std::string sha256Hex(const std::string& s) { return hex(sha256(s.data(), s.size())); }

TEST(Sha256, NistExamples) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmn"
                      "opjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAs) {
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

std::vector<uint8_t> boundaryMessage(size_t n) {
  std::vector<uint8_t> m(n);
  for (size_t i = 0; i < n; ++i) m[i] = static_cast<uint8_t>((i * 37 + 11) & 0xff);
  return m;
}

TEST(Sha256, PaddingBoundaries) {
  const std::pair<size_t, const char*> cases[] = {
      {55, "2900465fcb533e05a158fd2b3be0e5e3b03740d83060aa3580e0d98a96bf2384"},
      {56, "31454ff48ef36af2f08fd511bdc37d9d5855ac23e992e5ff5445cb6b7674a674"},
      {63, "5f6401b96532c36de4e65beec0409b69b1d181864c8009b7a04f43e5d56350d1"},
      {64, "94eb5de4943613fd048dc93393ab06877405faa39c11f53e9386083339833e7e"},
      {65, "fc518669b6eb4b4dd91827ecacef86689c725bd5bab888fd3b26dbb196eec954"},
      {119, "b0dc41b1a384e2f1203f0351b38fbeaafceef577ce1191d5bfc25da39f721eae"},
      {120, "5df24dd802ac26132ce608dcb5f09841eef039ee0f152acf98d26d17fe4e88e6"},
      {128, "0aedd4856f8eba0963627336ad5144a9a7dbe12498e6066f0165fc97d8ddee4c"},
  };
  for (const auto& [n, digest] : cases) {
    auto m = boundaryMessage(n);
    EXPECT_EQ(hex(sha256(m.data(), m.size())), digest) << "length " << n;
  }
}

TEST(Sha256, IncrementalEqualsOneShot) {
  auto m = boundaryMessage(200);
  const std::string whole = hex(sha256(m.data(), m.size()));
  for (size_t a = 0; a <= m.size(); a += 7)
    for (size_t b = a; b <= m.size(); b += 23) {
      Sha256 h;
      h.update(m.data(), a);
      h.update(m.data() + a, b - a);
      h.update(m.data() + b, m.size() - b);
      ASSERT_EQ(hex(h.finish()), whole) << "split at " << a << ", " << b;
    }
}

std::string hmacHex(const std::vector<uint8_t>& key, const std::string& data) {
  return hex(hmacSha256(key.data(), key.size(), data.data(), data.size()));
}

TEST(HmacSha256, Rfc4231) {
  // Test case 1
  EXPECT_EQ(hmacHex(std::vector<uint8_t>(20, 0x0b), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2
  EXPECT_EQ(hmacHex({'J', 'e', 'f', 'e'}, "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 3
  EXPECT_EQ(hmacHex(std::vector<uint8_t>(20, 0xaa), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // Test case 4
  std::vector<uint8_t> key4;
  for (uint8_t i = 1; i <= 25; ++i) key4.push_back(i);
  EXPECT_EQ(hmacHex(key4, std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Test case 5 (truncated to 128 bits)
  EXPECT_EQ(hmacHex(std::vector<uint8_t>(20, 0x0c), "Test With Truncation").substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
  // Test cases 6 and 7: a key longer than a block is hashed first.
  const std::vector<uint8_t> longKey(131, 0xaa);
  EXPECT_EQ(hmacHex(longKey, "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(hmacHex(longKey,
                    "This is a test using a larger than block-size key and a larger than "
                    "block-size data. The key needs to be hashed before being used by the HMAC "
                    "algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256, IncrementalEqualsOneShot) {
  const std::string key = "Jefe";
  HmacSha256 mac(key.data(), key.size());
  mac.update("what do ya ");
  mac.update("want for nothing?");
  EXPECT_EQ(hex(mac.finish()), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(ConstantTimeEqual, ComparesEveryByte) {
  uint8_t a[32] = {}, b[32] = {};
  EXPECT_TRUE(constantTimeEqual(a, b, sizeof a));
  for (size_t i = 0; i < sizeof a; ++i) {
    b[i] = 1;
    EXPECT_FALSE(constantTimeEqual(a, b, sizeof a)) << "difference at byte " << i;
    b[i] = 0;
  }
  EXPECT_TRUE(constantTimeEqual(a, b, 0));
}

}  // namespace
}  // namespace coil
