// Addresses as text: COIL_COMM_ID=host:port (and MASTER_ADDR/MASTER_PORT,
// joined the same way), read by SocketAddress::parse, then turned into the
// id of a fixed rendezvous root (makeUniqueId).
//
// Input: the text, up to its first NUL (an environment variable cannot hold
// one) and at most 256 bytes. Host names are never resolved: the fuzz
// executables' getaddrinfo accepts numeric hosts only (fuzz_util.cc).
// Checks: a refusal is coilInvalidArgument (parse) or coilInvalidUsage
// (makeUniqueId, naming COIL_COMM_ID); an accepted address round-trips
// through its text and wire forms; makeUniqueId gives the same root as
// parse, hosted by rank 0, and its id encodes and decodes to itself.
#include <cstdlib>
#include <cstring>
#include <string>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "fuzz_util.h"

using namespace coil;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), strnlen(reinterpret_cast<const char*>(data), std::min<size_t>(size, 256)));

  SocketAddress parsed;
  bool accepted = false;
  try {
    parsed = SocketAddress::parse(text);
    accepted = true;
  } catch (const Error& e) {
    FUZZ_CHECK(e.code() == coilInvalidArgument);
  }
  if (accepted) fuzz::checkAddressRoundTrips(parsed);

  // The same text through COIL_COMM_ID. (Empty would mean "unset", and
  // makeUniqueId would start a real root: not here.)
  if (text.empty()) return 0;
  setenv("COIL_COMM_ID", text.c_str(), 1);
  try {
    UniqueIdData id = makeUniqueId();
    FUZZ_CHECK(accepted);
    FUZZ_CHECK(fuzz::sameAddress(id.root, parsed));
    FUZZ_CHECK(id.rootHostedByRank0);
    UniqueIdData back = decodeUniqueId(encodeUniqueId(id));
    FUZZ_CHECK(fuzz::sameAddress(back.root, id.root));
    FUZZ_CHECK(std::memcmp(back.secret, id.secret, sizeof id.secret) == 0);
    FUZZ_CHECK(back.nonce == id.nonce && back.rootHostedByRank0);
  } catch (const Error& e) {
    FUZZ_CHECK(!accepted);
    FUZZ_CHECK(e.code() == coilInvalidUsage);
    FUZZ_CHECK(std::strstr(e.what(), "COIL_COMM_ID") != nullptr);
  }
  return 0;
}
