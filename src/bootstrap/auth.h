// Mutual authentication of a fresh connection with the communicator secret.
//
// Challenge-response with HMAC-SHA-256 (sha256.h); the secret never crosses
// the wire. Both sides prove knowledge; a failure throws coilRemoteError
// (the accepting side logs it as a refused stranger and drops the socket).
//
//   server → client : nonceS (16 B)
//   client → server : nonceC (16 B), HMAC(secret, "coil-c" | nonceS | nonceC | purpose)
//   server → client : HMAC(secret, "coil-s" | nonceC | nonceS | purpose)
//
// `purpose` binds the proof to the kind of connection ("root", "ring",
// "tcp-data"), so a proof for one cannot be replayed on another.
#pragma once

#include <cstdint>

#include "bootstrap/socket.h"

namespace coil::auth {

inline constexpr size_t kSecretBytes = 16;

/// Fills `out` with cryptographically random bytes (getrandom).
void randomBytes(void* out, size_t n);

/// Connecting side. Throws coilRemoteError if the server cannot prove itself.
void proveAsClient(Socket& s, const uint8_t* secret, const char* purpose,
                   const Deadline& deadline);
/// Accepting side. Throws coilRemoteError if the client cannot prove itself.
void verifyAsServer(Socket& s, const uint8_t* secret, const char* purpose,
                    const Deadline& deadline);

}  // namespace coil::auth
