// The hello a rank sends the rendezvous root right after authenticating
// (wire::getHello, read by root.cc), and the 24-byte address inside it
// (wire::getAddress, also read from the root's answer and the unique id).
//
// Input: the bytes as they come off the socket; the root reads exactly
// kHelloBytes, so a shorter input only exercises the address.
// Checks: getHello accepts exactly when the magic and the address are valid,
// leaves its output alone when it refuses, and what it accepts re-encodes
// (putHello) to the same bytes; every accepted address round-trips through
// its wire and text forms.
#include <cstring>

#include "bootstrap/wire.h"
#include "fuzz_util.h"

using namespace coil;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= wire::kAddressBytes) fuzz::checkWireAddress(data, nullptr);
  if (size < wire::kHelloBytes) return 0;

  wire::Hello h;
  h.rank = -7;
  h.nranks = -7;
  const bool accepted = wire::getHello(data, &h);
  SocketAddress listener;
  const bool addressOk = fuzz::checkWireAddress(data + 12, &listener);
  FUZZ_CHECK(accepted == (wire::getU32(data) == wire::kHelloMagic && addressOk));
  if (!accepted) {
    FUZZ_CHECK(h.rank == -7 && h.nranks == -7 && h.listener.length == 0);
    return 0;
  }
  FUZZ_CHECK(h.rank == static_cast<int32_t>(wire::getU32(data + 4)));
  FUZZ_CHECK(h.nranks == static_cast<int32_t>(wire::getU32(data + 8)));
  FUZZ_CHECK(fuzz::sameAddress(h.listener, listener));
  uint8_t again[wire::kHelloBytes];
  wire::putHello(again, h);
  FUZZ_CHECK(std::memcmp(again, data, sizeof again) == 0);
  return 0;
}
