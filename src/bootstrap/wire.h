// Byte layouts that leave the process: big-endian integers, socket
// addresses, and the messages between ranks and the rendezvous root.
// Shared by unique_id.cc, root.cc and bootstrap.cc so both ends of every
// message are written from one definition.
#pragma once

#include <cstddef>
#include <cstdint>

#include "net/socket.h"

namespace coil::wire {

inline void putU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline uint16_t getU16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline void putU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
inline uint32_t getU32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
inline void putU64(uint8_t* p, uint64_t v) {
  putU32(p, static_cast<uint32_t>(v >> 32));
  putU32(p + 4, static_cast<uint32_t>(v));
}
inline uint64_t getU64(const uint8_t* p) { return (uint64_t{getU32(p)} << 32) | getU32(p + 4); }

/// An address: family tag (4 or 6) u16, port u16, IPv6 scope id u32, IP 16 B
/// (IPv4 uses the first 4).
inline constexpr size_t kAddressBytes = 24;
/// Writes kAddressBytes. `a` must be IPv4 or IPv6.
void putAddress(uint8_t* p, const SocketAddress& a);
/// Reads kAddressBytes; false if they are not a valid encoding.
bool getAddress(const uint8_t* p, SocketAddress* out);

/// Rank → root, right after authentication: who I am and where I listen.
struct Hello {
  int32_t rank = -1;
  int32_t nranks = 0;
  SocketAddress listener;
};
inline constexpr uint32_t kHelloMagic = 0x436f4c48;  // "CoLH"
inline constexpr size_t kHelloBytes = 12 + kAddressBytes;
/// Writes kHelloBytes.
void putHello(uint8_t* p, const Hello& h);
/// Reads kHelloBytes; false on a bad magic or address.
bool getHello(const uint8_t* p, Hello* out);

/// Root → rank: this header, then `length` bytes of payload: the listener
/// address of every rank in rank order (code == coilSuccess), or the text of
/// the error that ended the rendezvous (any other code).
struct ReplyHeader {
  uint32_t code = 0;
  uint32_t length = 0;
};
inline constexpr uint32_t kReplyMagic = 0x436f4c52;  // "CoLR"
inline constexpr size_t kReplyHeaderBytes = 12;
inline constexpr uint32_t kMaxErrorTextBytes = 4096;
/// Writes kReplyHeaderBytes.
void putReplyHeader(uint8_t* p, const ReplyHeader& h);
/// Reads kReplyHeaderBytes; false on a bad magic.
bool getReplyHeader(const uint8_t* p, ReplyHeader* out);
/// Whether an answer's length suits its code before the payload is read:
/// exactly nranks addresses for coilSuccess, at most kMaxErrorTextBytes of
/// text otherwise.
inline bool replyFits(const ReplyHeader& h, size_t nranks) {
  return h.code == 0 ? h.length == nranks * kAddressBytes : h.length <= kMaxErrorTextBytes;
}

}  // namespace coil::wire
