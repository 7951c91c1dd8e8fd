// The authentication handshake (auth.h): the only bytes a stranger can send
// before it is refused. Both sides read fixed-size messages; what they parse
// is a nonce and a MAC.
//
// Input: secret (16) | purpose length (1, % 24) | purpose | mode (1) |
//        "server" bytes: nonceS (16) then reply (32) (shorter: EOF early) |
//        "client" bytes: nonceC (16) then MAC (32) | flip index (1)
//   mode bit 0: make the client MAC the right one, so checkClientProof
//               reaches its accepting branch.
//   mode bit 1: also run an honest client against an honest server (two
//               threads), with the same secret (bit 2 clear) or one bit off.
// Checks, each against auth.h's protocol written out here with HmacSha256:
//   - checkClientProof accepts exactly the right MAC, and then writes the
//     right server MAC; one flipped byte, or another purpose, is refused.
//   - a client (proveAsClient) given fuzzed server bytes sends a proof the
//     server check accepts, and succeeds only if the reply is the right MAC;
//     it fails with coilRemoteError otherwise, EOF included.
//   - a server (verifyAsServer) given fuzzed client bytes sends its 16-byte
//     nonce and nothing else, and fails with coilRemoteError.
//   - honest client and server agree iff their secrets do.
#include <cstring>
#include <string>
#include <thread>

#include "net/auth.h"
#include "net/sha256.h"
#include "core/error.h"
#include "fuzz_util.h"

using namespace coil;

namespace {

constexpr int64_t kMs = 5000;  // never reached: every read has its bytes or an EOF

Sha256Digest mac(const uint8_t* secret, const char* label, const uint8_t* first,
                 const uint8_t* second, const std::string& purpose) {
  HmacSha256 h(secret, auth::kSecretBytes);
  h.update(label);
  h.update(first, auth::kNonceBytes);
  h.update(second, auth::kNonceBytes);
  h.update(purpose);
  return h.finish();
}

std::vector<uint8_t> padded(std::vector<uint8_t> v, size_t n) {
  v.resize(n, 0);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const std::vector<uint8_t> secret = padded(in.bytes(auth::kSecretBytes), auth::kSecretBytes);
  std::vector<uint8_t> purposeBytes = in.bytes(in.u8() % 24);
  std::string purpose(purposeBytes.begin(), purposeBytes.end());
  purpose.resize(std::strlen(purpose.c_str()));  // a C string: up to its NUL
  const uint8_t mode = in.u8();
  const std::vector<uint8_t> server = in.bytes(auth::kNonceBytes + auth::kMacBytes);
  std::vector<uint8_t> client = padded(in.bytes(auth::kClientProofBytes), auth::kClientProofBytes);
  const uint8_t flip = in.u8();

  // 1. The server's check as a pure function.
  {
    const std::vector<uint8_t> nonceS = padded(server, auth::kNonceBytes);
    const uint8_t* nonceC = client.data();
    Sha256Digest right = mac(secret.data(), "coil-c", nonceS.data(), nonceC, purpose);
    if (mode & 1) std::memcpy(client.data() + auth::kNonceBytes, right.data(), auth::kMacBytes);
    const bool rightMac =
        std::memcmp(client.data() + auth::kNonceBytes, right.data(), auth::kMacBytes) == 0;
    uint8_t reply[auth::kMacBytes];
    std::memset(reply, 0xa5, sizeof reply);
    const bool ok =
        auth::checkClientProof(secret.data(), purpose.c_str(), nonceS.data(), client.data(), reply);
    FUZZ_CHECK(ok == rightMac);
    if (ok) {
      Sha256Digest serverMac = mac(secret.data(), "coil-s", nonceC, nonceS.data(), purpose);
      FUZZ_CHECK(std::memcmp(reply, serverMac.data(), sizeof reply) == 0);
      std::vector<uint8_t> changed = client;
      changed[flip % changed.size()] ^= static_cast<uint8_t>(1u << (flip % 8));
      FUZZ_CHECK(!auth::checkClientProof(secret.data(), purpose.c_str(), nonceS.data(),
                                         changed.data(), reply));
      const std::string other = purpose + "x";
      FUZZ_CHECK(!auth::checkClientProof(secret.data(), other.c_str(), nonceS.data(),
                                         client.data(), reply));
    }
  }

  // 2. A client facing whatever the "server" sent: the bytes wait in the
  // socket, then the server side closes.
  {
    Socket near, far;
    fuzz::socketPair(&near, &far);
    fuzz::writeAll(far, server.data(), server.size());
    ::shutdown(far.fd(), SHUT_WR);
    bool succeeded = false;
    try {
      auth::proveAsClient(near, secret.data(), purpose.c_str(), Deadline::after(kMs));
      succeeded = true;
    } catch (const Error& e) {
      FUZZ_CHECK(e.code() == coilRemoteError);
    }
    const std::vector<uint8_t> sent = fuzz::readAvailable(far);
    if (server.size() < auth::kNonceBytes) {
      FUZZ_CHECK(!succeeded && sent.empty());  // no challenge, no proof
    } else {
      // Its proof is one the server accepts, and the reply it wants is the
      // server's MAC over exactly that proof.
      FUZZ_CHECK(sent.size() == auth::kClientProofBytes);
      uint8_t expected[auth::kMacBytes];
      FUZZ_CHECK(auth::checkClientProof(secret.data(), purpose.c_str(), server.data(), sent.data(),
                                        expected));
      const bool rightReply = server.size() == auth::kNonceBytes + auth::kMacBytes &&
                              std::memcmp(server.data() + auth::kNonceBytes, expected,
                                          auth::kMacBytes) == 0;
      FUZZ_CHECK(succeeded == rightReply);
    }
  }

  // 3. A server facing whatever the "client" sent (its nonce is fresh, so no
  // prepared answer can be right).
  {
    Socket near, far;
    fuzz::socketPair(&near, &far);
    const size_t n = std::min<size_t>(client.size(), flip % (auth::kClientProofBytes + 8));
    fuzz::writeAll(far, client.data(), n);
    ::shutdown(far.fd(), SHUT_WR);
    bool succeeded = false;
    try {
      auth::verifyAsServer(near, secret.data(), purpose.c_str(), Deadline::after(kMs));
      succeeded = true;
    } catch (const Error& e) {
      FUZZ_CHECK(e.code() == coilRemoteError);
    }
    FUZZ_CHECK(!succeeded);
    FUZZ_CHECK(fuzz::readAvailable(far).size() == auth::kNonceBytes);
  }

  // 4. Honest client and server over one connection.
  if (mode & 2) {
    std::vector<uint8_t> clientSecret = secret;
    if (mode & 4) clientSecret[flip % clientSecret.size()] ^= static_cast<uint8_t>(1u << (flip % 8));
    Socket a, b;
    fuzz::socketPair(&a, &b);
    bool serverOk = false;
    std::thread serverThread([&] {
      try {
        auth::verifyAsServer(b, secret.data(), purpose.c_str(), Deadline::after(kMs));
        serverOk = true;
      } catch (const Error& e) {
        FUZZ_CHECK(e.code() == coilRemoteError);
      }
      b.reset();  // a refused client sees EOF, as from a real server
    });
    bool clientOk = false;
    try {
      auth::proveAsClient(a, clientSecret.data(), purpose.c_str(), Deadline::after(kMs));
      clientOk = true;
    } catch (const Error& e) {
      FUZZ_CHECK(e.code() == coilRemoteError);
    }
    serverThread.join();
    const bool same = clientSecret == secret;
    FUZZ_CHECK(serverOk == same);
    FUZZ_CHECK(clientOk == same);
  }
  return 0;
}
