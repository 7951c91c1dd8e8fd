#include "bootstrap/wire.h"

#include <cstring>

namespace coil::wire {

void putAddress(uint8_t* p, const SocketAddress& a) {
  std::memset(p, 0, kAddressBytes);
  if (a.family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a.storage);
    putU16(p, 4);
    putU16(p + 2, a.port());
    std::memcpy(p + 8, &in->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    putU16(p, 6);
    putU16(p + 2, a.port());
    putU32(p + 4, in6->sin6_scope_id);
    std::memcpy(p + 8, &in6->sin6_addr, 16);
  }
}

bool getAddress(const uint8_t* p, SocketAddress* out) {
  SocketAddress a;
  uint16_t tag = getU16(p);
  if (tag == 4) {
    // Everything after the 4 address bytes must be zero in a valid encoding.
    for (size_t i = 4; i < 8; ++i)
      if (p[i] != 0) return false;
    for (size_t i = 12; i < kAddressBytes; ++i)
      if (p[i] != 0) return false;
    auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, p + 8, 4);
    a.length = sizeof(sockaddr_in);
  } else if (tag == 6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_scope_id = getU32(p + 4);
    std::memcpy(&in6->sin6_addr, p + 8, 16);
    a.length = sizeof(sockaddr_in6);
  } else {
    return false;
  }
  a.setPort(getU16(p + 2));
  *out = a;
  return true;
}

void putHello(uint8_t* p, const Hello& h) {
  putU32(p, kHelloMagic);
  putU32(p + 4, static_cast<uint32_t>(h.rank));
  putU32(p + 8, static_cast<uint32_t>(h.nranks));
  putAddress(p + 12, h.listener);
}

bool getHello(const uint8_t* p, Hello* out) {
  if (getU32(p) != kHelloMagic) return false;
  Hello h;
  h.rank = static_cast<int32_t>(getU32(p + 4));
  h.nranks = static_cast<int32_t>(getU32(p + 8));
  if (!getAddress(p + 12, &h.listener)) return false;
  *out = h;
  return true;
}

void putReplyHeader(uint8_t* p, const ReplyHeader& h) {
  putU32(p, kReplyMagic);
  putU32(p + 4, h.code);
  putU32(p + 8, h.length);
}

bool getReplyHeader(const uint8_t* p, ReplyHeader* out) {
  if (getU32(p) != kReplyMagic) return false;
  out->code = getU32(p + 4);
  out->length = getU32(p + 8);
  return true;
}

}  // namespace coil::wire
