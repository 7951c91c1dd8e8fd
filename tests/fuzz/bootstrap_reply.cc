// The rendezvous root's answer as a rank reads it (bootstrap.cc): a 12-byte
// header (wire::getReplyHeader), then `length` bytes: nranks addresses of
// 24 bytes (code coilSuccess), or the text of the error that ended the
// rendezvous (any other code, at most kMaxErrorTextBytes).
//
// Input: u16 selecting nranks (1 + value % 1024), then the bytes off the
// socket: header, payload.
// Checks: the header decoder accepts exactly the right magic and re-encodes
// to the same bytes; an answer that passes bootstrap.cc's shape check
// (wire::replyFits) maps to a valid result code and a
// payload of exactly `length` bytes; every address of a success table that
// decodes re-encodes byte-exactly and round-trips through its text.
#include <cstring>
#include <string>

#include "bootstrap/wire.h"
#include "core/error.h"
#include "fuzz_util.h"

using namespace coil;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const size_t nranks = 1 + in.u16() % 1024;
  std::vector<uint8_t> headerBytes = in.bytes(wire::kReplyHeaderBytes);
  if (headerBytes.size() < wire::kReplyHeaderBytes) return 0;  // recvAll: whole or EOF

  wire::ReplyHeader header{0xdeadbeef, 0xfeedface};
  const bool accepted = wire::getReplyHeader(headerBytes.data(), &header);
  FUZZ_CHECK(accepted == (wire::getU32(headerBytes.data()) == wire::kReplyMagic));
  if (!accepted) {
    FUZZ_CHECK(header.code == 0xdeadbeef && header.length == 0xfeedface);
    return 0;
  }
  FUZZ_CHECK(header.code == wire::getU32(headerBytes.data() + 4));
  FUZZ_CHECK(header.length == wire::getU32(headerBytes.data() + 8));
  uint8_t again[wire::kReplyHeaderBytes];
  wire::putReplyHeader(again, header);
  FUZZ_CHECK(std::memcmp(again, headerBytes.data(), sizeof again) == 0);

  // bootstrap.cc's shape check, before it sizes the payload buffer.
  const size_t tableBytes = nranks * wire::kAddressBytes;
  if (!wire::replyFits(header, nranks)) return 0;  // "sent a malformed answer"
  FUZZ_CHECK(header.length <= std::max<size_t>(tableBytes, wire::kMaxErrorTextBytes));
  std::vector<uint8_t> payload = in.bytes(header.length);
  if (payload.size() < header.length) return 0;  // the root closed early: recvAll throws

  if (header.code != coilSuccess) {
    auto code = header.code < coilNumResults ? static_cast<coilResult_t>(header.code)
                                             : coilRemoteError;
    FUZZ_CHECK(code != coilSuccess && code < coilNumResults);
    FUZZ_CHECK(resultName(code) != nullptr);
    std::string text(payload.begin(), payload.end());
    FUZZ_CHECK(text.size() == header.length);
    return 0;
  }
  for (size_t r = 0; r < nranks; ++r) {
    SocketAddress a;
    if (!fuzz::checkWireAddress(payload.data() + r * wire::kAddressBytes, &a))
      return 0;  // "sent a malformed address for rank r"
  }
  return 0;
}
