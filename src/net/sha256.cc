// SHA-256 from FIPS 180-4 section 6.2; HMAC from RFC 2104.
#include "net/sha256.h"

#include <cstring>

namespace coil {
namespace {

// FIPS 180-4 4.2.2: first 32 bits of the fractional parts of the cube roots
// of the first 64 primes.
constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// FIPS 180-4 5.3.3: first 32 bits of the fractional parts of the square
// roots of the first 8 primes.
constexpr uint32_t kInitialState[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
// The six logical functions of FIPS 180-4 4.1.2.
constexpr uint32_t ch(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (~x & z); }
constexpr uint32_t maj(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (x & z) ^ (y & z); }
constexpr uint32_t bigSigma0(uint32_t x) { return rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22); }
constexpr uint32_t bigSigma1(uint32_t x) { return rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25); }
constexpr uint32_t smallSigma0(uint32_t x) { return rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3); }
constexpr uint32_t smallSigma1(uint32_t x) { return rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10); }

uint32_t loadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

void Sha256::reset() {
  std::memcpy(state_, kInitialState, sizeof state_);
  buffered_ = 0;
  totalBytes_ = 0;
}

void Sha256::compressBlock(const uint8_t* block) {
  // Message schedule (6.2.2 step 1).
  uint32_t w[64];
  for (int t = 0; t < 16; ++t) w[t] = loadBigEndian32(block + 4 * t);
  for (int t = 16; t < 64; ++t)
    w[t] = smallSigma1(w[t - 2]) + w[t - 7] + smallSigma0(w[t - 15]) + w[t - 16];

  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int t = 0; t < 64; ++t) {
    uint32_t t1 = h + bigSigma1(e) + ch(e, f, g) + kRoundConstants[t] + w[t];
    uint32_t t2 = bigSigma0(a) + maj(a, b, c);
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::update(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  totalBytes_ += n;
  if (buffered_ > 0) {
    size_t take = n < 64 - buffered_ ? n : 64 - buffered_;
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < 64) return;
    compressBlock(buffer_);
    buffered_ = 0;
  }
  for (; n >= 64; p += 64, n -= 64) compressBlock(p);
  std::memcpy(buffer_, p, n);
  buffered_ = n;
}

Sha256Digest Sha256::finish() {
  // Padding (5.1.1): a 1 bit, zeros up to 56 mod 64, then the bit length.
  const uint64_t bitLength = totalBytes_ * 8;
  buffer_[buffered_++] = 0x80;
  if (buffered_ > 56) {
    std::memset(buffer_ + buffered_, 0, 64 - buffered_);
    compressBlock(buffer_);
    buffered_ = 0;
  }
  std::memset(buffer_ + buffered_, 0, 56 - buffered_);
  for (int i = 0; i < 8; ++i) buffer_[56 + i] = static_cast<uint8_t>(bitLength >> (56 - 8 * i));
  compressBlock(buffer_);

  Sha256Digest out;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(state_[i] >> (24 - 8 * j));
  return out;
}

Sha256Digest sha256(const void* data, size_t n) {
  Sha256 h;
  h.update(data, n);
  return h.finish();
}

HmacSha256::HmacSha256(const void* key, size_t keyBytes) {
  // K0: the key, hashed if longer than a block, zero-padded to a block.
  uint8_t block[64] = {};
  if (keyBytes > 64) {
    Sha256Digest hashed = sha256(key, keyBytes);
    std::memcpy(block, hashed.data(), hashed.size());
  } else if (keyBytes > 0) {
    std::memcpy(block, key, keyBytes);
  }
  uint8_t innerPad[64];
  for (int i = 0; i < 64; ++i) {
    innerPad[i] = block[i] ^ 0x36;
    outerPad_[i] = block[i] ^ 0x5c;
  }
  inner_.update(innerPad, sizeof innerPad);
}

Sha256Digest HmacSha256::finish() {
  Sha256Digest innerDigest = inner_.finish();
  Sha256 outer;
  outer.update(outerPad_, sizeof outerPad_);
  outer.update(innerDigest.data(), innerDigest.size());
  return outer.finish();
}

Sha256Digest hmacSha256(const void* key, size_t keyBytes, const void* data, size_t n) {
  HmacSha256 mac(key, keyBytes);
  mac.update(data, n);
  return mac.finish();
}

bool constantTimeEqual(const void* a, const void* b, size_t n) {
  const auto* x = static_cast<const volatile uint8_t*>(a);
  const auto* y = static_cast<const volatile uint8_t*>(b);
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= static_cast<uint8_t>(x[i] ^ y[i]);
  return diff == 0;
}

}  // namespace coil
