// Challenge-response authentication (protocol in auth.h). Each side picks a
// fresh random nonce, so a recorded exchange cannot be replayed, and the two
// MACs carry different labels ("coil-c" / "coil-s"), so a server cannot
// reflect a client's own proof back at it.
#include "net/auth.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "bootstrap/secret_origin.h"
#include "net/sha256.h"
#include "core/error.h"

namespace coil::auth {
namespace {

Sha256Digest clientMac(const uint8_t* secret, const char* purpose, const uint8_t* nonceS,
                       const uint8_t* nonceC) {
  HmacSha256 mac(secret, kSecretBytes);
  mac.update("coil-c");
  mac.update(nonceS, kNonceBytes);
  mac.update(nonceC, kNonceBytes);
  mac.update(purpose);
  return mac.finish();
}

Sha256Digest serverMac(const uint8_t* secret, const char* purpose, const uint8_t* nonceS,
                       const uint8_t* nonceC) {
  HmacSha256 mac(secret, kSecretBytes);
  mac.update("coil-s");
  mac.update(nonceC, kNonceBytes);
  mac.update(nonceS, kNonceBytes);
  mac.update(purpose);
  return mac.finish();
}

// What the origin of `secret` suggests checking (secret_origin.h), as a
// suffix for a failure message; empty for secrets with no noted origin.
std::string advice(const uint8_t* secret) {
  std::string a = secretOriginAdvice(secret);
  return a.empty() ? a : "; " + a;
}

std::string peerText(const Socket& s) {
  try {
    return s.peerAddress().toString();
  } catch (const Error&) {
    return "peer";
  }
}

}  // namespace

void randomBytes(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    ssize_t k = getrandom(p, n, 0);
    if (k < 0) {
      if (errno == EINTR) continue;
      failErrno("getrandom", errno);
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

bool checkClientProof(const uint8_t* secret, const char* purpose, const uint8_t* serverNonce,
                      const uint8_t* clientProof, uint8_t* serverProof) {
  const uint8_t* nonceC = clientProof;
  Sha256Digest expected = clientMac(secret, purpose, serverNonce, nonceC);
  if (!constantTimeEqual(expected.data(), clientProof + kNonceBytes, kMacBytes)) return false;
  Sha256Digest reply = serverMac(secret, purpose, serverNonce, nonceC);
  std::memcpy(serverProof, reply.data(), kMacBytes);
  return true;
}

void proveAsClient(Socket& s, const uint8_t* secret, const char* purpose,
                   const Deadline& deadline, const std::atomic<bool>* abortFlag) {
  const std::string peer = peerText(s);
  uint8_t nonceS[kNonceBytes];
  s.recvAll(nonceS, sizeof nonceS, deadline, abortFlag, peer.c_str());

  uint8_t proof[kClientProofBytes];
  randomBytes(proof, kNonceBytes);
  Sha256Digest mac = clientMac(secret, purpose, nonceS, proof);
  std::memcpy(proof + kNonceBytes, mac.data(), kMacBytes);
  s.sendAll(proof, sizeof proof, deadline, abortFlag, peer.c_str());

  uint8_t reply[kMacBytes];
  try {
    s.recvAll(reply, sizeof reply, deadline, abortFlag, peer.c_str());
  } catch (const Error& e) {
    if (e.code() != coilRemoteError || (abortFlag != nullptr && abortFlag->load())) throw;
    // A server that rejects our proof just drops us.
    fail(coilRemoteError, "authentication of the '", purpose, "' connection to ", peer,
         " failed: it dropped us after our proof, so it does not share our secret (a different "
         "communicator or job on that port?) [",
         e.what(), "]", advice(secret));
  }
  Sha256Digest expected = serverMac(secret, purpose, nonceS, proof);
  if (!constantTimeEqual(expected.data(), reply, kMacBytes))
    fail(coilRemoteError, peer, " failed to prove it knows the communicator secret ('", purpose,
         "' connection)", advice(secret));
}

void verifyAsServer(Socket& s, const uint8_t* secret, const char* purpose,
                    const Deadline& deadline, const std::atomic<bool>* abortFlag) {
  const std::string peer = peerText(s);
  uint8_t nonceS[kNonceBytes];
  randomBytes(nonceS, sizeof nonceS);
  s.sendAll(nonceS, sizeof nonceS, deadline, abortFlag, peer.c_str());
  uint8_t proof[kClientProofBytes];
  s.recvAll(proof, sizeof proof, deadline, abortFlag, peer.c_str());
  uint8_t reply[kMacBytes];
  if (!checkClientProof(secret, purpose, nonceS, proof, reply))
    fail(coilRemoteError, peer, " failed authentication for a '", purpose,
         "' connection (wrong secret, or not a coil peer)", advice(secret));
  s.sendAll(reply, sizeof reply, deadline, abortFlag, peer.c_str());
}

}  // namespace coil::auth
