// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), written for coil's
// connection authentication (auth.h) and for deriving fixed-root secrets.
//
// Small and dependency-free on purpose: the bootstrap must not pull in a
// crypto library just to prove knowledge of a 128-bit secret. Not hardened
// against side channels beyond what auth needs (MAC comparison is constant
// time; see constantTimeEqual).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace coil {

inline constexpr size_t kSha256Bytes = 32;
using Sha256Digest = std::array<uint8_t, kSha256Bytes>;

/// Incremental SHA-256. update() any number of times, then finish() once;
/// after finish() the object must not be used again (reset() restarts it).
class Sha256 {
 public:
  Sha256() { reset(); }
  /// Starts a new message.
  void reset();
  /// Appends n bytes of message.
  void update(const void* data, size_t n);
  void update(std::string_view text) { update(text.data(), text.size()); }
  /// Pads, processes the last block and returns the digest.
  Sha256Digest finish();

 private:
  void compressBlock(const uint8_t* block);

  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;      // bytes waiting in buffer_
  uint64_t totalBytes_ = 0;  // message length so far
};

/// One-shot SHA-256 of n bytes.
Sha256Digest sha256(const void* data, size_t n);

/// Incremental HMAC-SHA-256 with a key of any length (longer than a block:
/// hashed first, as RFC 2104 prescribes).
class HmacSha256 {
 public:
  HmacSha256(const void* key, size_t keyBytes);
  /// Appends message bytes.
  void update(const void* data, size_t n) { inner_.update(data, n); }
  void update(std::string_view text) { inner_.update(text); }
  /// Returns the MAC; the object must not be used afterwards.
  Sha256Digest finish();

 private:
  Sha256 inner_;
  uint8_t outerPad_[64];
};

/// One-shot HMAC-SHA-256.
Sha256Digest hmacSha256(const void* key, size_t keyBytes, const void* data, size_t n);

/// Compares n bytes in time independent of where they differ (for MACs).
bool constantTimeEqual(const void* a, const void* b, size_t n);

}  // namespace coil
