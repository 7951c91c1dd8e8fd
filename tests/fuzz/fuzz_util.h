// Shared by the fuzz targets in tests/fuzz: a reader that takes an input
// apart from the front (so hand-made seeds stay readable), a check that
// aborts with a message (libFuzzer then saves the input as a crash), and the
// round-trip checks of socket addresses that several targets share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "net/socket.h"

namespace coil::fuzz {

/// Prints "fuzz check failed: ..." and aborts.
[[noreturn]] void checkFailed(const char* file, int line, const char* what);

/// Call from LLVMFuzzerInitialize: silences coil's warnings (a refused frame
/// logs one; thousands a second would drown the fuzzer's output) and sets
/// COIL_SECRET to a fixed value.
void init();

/// The input, consumed from the front; reads past the end give zeros.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  size_t left() const { return left_; }
  bool empty() const { return left_ == 0; }
  uint8_t u8() {
    if (left_ == 0) return 0;
    --left_;
    return *p_++;
  }
  uint16_t u16() { return static_cast<uint16_t>((u8() << 8) | u8()); }
  uint32_t u32() { return (uint32_t{u16()} << 16) | u16(); }
  uint64_t u64() { return (uint64_t{u32()} << 32) | u32(); }
  /// Up to `n` bytes (fewer at the end of the input).
  std::vector<uint8_t> bytes(size_t n) {
    n = std::min(n, left_);
    std::vector<uint8_t> out(p_, p_ + n);
    p_ += n;
    left_ -= n;
    return out;
  }
  std::vector<uint8_t> rest() { return bytes(left_); }

 private:
  const uint8_t* p_;
  size_t left_;
};

/// True when a and b name the same endpoint (family, IP, port, IPv6 scope).
bool sameAddress(const SocketAddress& a, const SocketAddress& b);
/// `a` (IPv4 or IPv6) survives both of its encodings: the 24 wire bytes
/// (wire::putAddress / getAddress, byte-exact both ways) and its text
/// (toString, then SocketAddress::parse).
void checkAddressRoundTrips(const SocketAddress& a);
/// Decodes 24 wire bytes like every receiver does; when they are accepted,
/// checks they are the canonical encoding of what they decode to, and that
/// it round-trips (checkAddressRoundTrips). Returns whether accepted.
bool checkWireAddress(const uint8_t* p, SocketAddress* out);

/// A connected pair of non-blocking local stream sockets (socketpair).
void socketPair(Socket* a, Socket* b);
/// Writes all of `bytes` to a socket whose buffer has room (aborts if not).
void writeAll(const Socket& s, const void* bytes, size_t n);
/// Reads whatever is buffered on `s` now, without waiting.
std::vector<uint8_t> readAvailable(const Socket& s);

}  // namespace coil::fuzz

#define FUZZ_CHECK(cond) \
  ((cond) ? (void)0 : ::coil::fuzz::checkFailed(__FILE__, __LINE__, #cond))
