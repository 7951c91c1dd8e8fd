// The public 128-byte coilUniqueId, which users ship between processes any
// way they like (MPI_Bcast, files, sockets): decodeUniqueId must refuse
// every byte string but the ones encodeUniqueId writes, and only with
// coilInvalidArgument.
//
// Input: one mode byte, then up to 128 id bytes (zero-padded).
//   mode bit 0: overwrite bytes 56..63 with the right checksum, so the
//               fuzzer reaches the checks behind it (flags, reserved bytes,
//               the root address) instead of stopping at the SHA-256.
//   mode bit 1: zero the reserved bytes 64..127.
// Checks: a refusal is coilInvalidArgument; an accepted id re-encodes to
// exactly the same 128 bytes; its root address round-trips. Then the other
// direction: fields taken from the input, encoded, decode to themselves.
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "net/sha256.h"
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
  const uint8_t mode = in.u8();
  std::vector<uint8_t> bytes = in.bytes(COIL_UNIQUE_ID_BYTES);
  coilUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (!bytes.empty()) std::memcpy(id.internal, bytes.data(), bytes.size());
  auto* p = reinterpret_cast<uint8_t*>(id.internal);
  if (mode & 1) {
    Sha256Digest check = sha256(p, 56);
    std::memcpy(p + 56, check.data(), 8);
  }
  if (mode & 2) std::memset(p + 64, 0, COIL_UNIQUE_ID_BYTES - 64);

  // Decode.
  bool accepted = false;
  UniqueIdData decoded;
  try {
    decoded = decodeUniqueId(id);
    accepted = true;
  } catch (const Error& e) {
    FUZZ_CHECK(e.code() == coilInvalidArgument);
  }
  if (accepted) {
    coilUniqueId again = encodeUniqueId(decoded);
    FUZZ_CHECK(std::memcmp(again.internal, id.internal, sizeof id.internal) == 0);
    fuzz::checkAddressRoundTrips(decoded.root);
  }

  // Encode: an id made of fields from the input (an address only when its
  // 24 bytes are valid) decodes to the same fields.
  UniqueIdData data0;
  if (!wire::getAddress(p + 8, &data0.root)) data0.root = SocketAddress::parse("127.0.0.1:0");
  data0.root.setPort(wire::getU16(p + 2));
  std::memcpy(data0.secret, p + 32, sizeof data0.secret);
  data0.nonce = wire::getU64(p + 48);
  data0.rootHostedByRank0 = (mode & 4) != 0;
  coilUniqueId encoded = encodeUniqueId(data0);
  UniqueIdData back = decodeUniqueId(encoded);  // throws (a crash) if it refuses its own output
  FUZZ_CHECK(fuzz::sameAddress(back.root, data0.root));
  FUZZ_CHECK(std::memcmp(back.secret, data0.secret, sizeof back.secret) == 0);
  FUZZ_CHECK(back.nonce == data0.nonce);
  FUZZ_CHECK(back.rootHostedByRank0 == data0.rootHostedByRank0);
  return 0;
}
