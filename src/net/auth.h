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

#include "net/socket.h"

namespace coil::auth {

inline constexpr size_t kSecretBytes = 16;
inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kMacBytes = 32;
/// What the client sends after receiving the server's nonce: nonceC | MAC.
inline constexpr size_t kClientProofBytes = kNonceBytes + kMacBytes;

/// Fills `out` with cryptographically random bytes (getrandom).
void randomBytes(void* out, size_t n);

/// Connecting side. Throws coilRemoteError if the server cannot prove itself
/// (or drops us because we could not), coilTimeout at the deadline.
void proveAsClient(Socket& s, const uint8_t* secret, const char* purpose,
                   const Deadline& deadline, const std::atomic<bool>* abortFlag = nullptr);
/// Accepting side. Throws coilRemoteError if the client cannot prove itself.
void verifyAsServer(Socket& s, const uint8_t* secret, const char* purpose,
                    const Deadline& deadline, const std::atomic<bool>* abortFlag = nullptr);

/// The server's check as a pure function, for callers that run many
/// handshakes at once with poll() (acceptor.h). `serverNonce` is what the
/// server sent (kNonceBytes), `clientProof` what came back
/// (kClientProofBytes). On success writes the server's reply (kMacBytes) to
/// `serverProof` and returns true; false means the client does not hold
/// `secret` (or answered for another `purpose`). MACs compare in constant time.
bool checkClientProof(const uint8_t* secret, const char* purpose, const uint8_t* serverNonce,
                      const uint8_t* clientProof, uint8_t* serverProof);

}  // namespace coil::auth
