// Origins of communicator secrets (secret_origin.h): a short list of
// fingerprints and advice, newest last.
#include "bootstrap/secret_origin.h"

#include <array>
#include <cstring>
#include <deque>
#include <mutex>

#include "net/auth.h"
#include "net/sha256.h"
#include "core/fork_guard.h"

namespace coil::auth {
namespace {

using Fingerprint = std::array<uint8_t, 16>;

// Domain-separated, so the fingerprint is no MAC or key used elsewhere.
Fingerprint fingerprintOf(const uint8_t* secret) {
  Sha256 h;
  h.update("coil-secret-origin");
  h.update(secret, kSecretBytes);
  Sha256Digest d = h.finish();
  Fingerprint f;
  std::memcpy(f.data(), d.data(), f.size());
  return f;
}

struct Entry {
  Fingerprint fingerprint;
  std::string advice;
};

// Held across fork (fork_guard.h): a rank forked while another thread
// notes an origin must not find this lock taken forever.
std::mutex& originsMutex() {
  static std::mutex* m = [] {
    auto* mutex = new std::mutex;
    guardAcrossFork(*mutex);
    return mutex;
  }();
  return *m;
}

// Never destroyed: a detached root thread may still authenticate at exit.
std::deque<Entry>& origins() {
  static auto* list = new std::deque<Entry>;
  return *list;
}

}  // namespace

void noteSecretOrigin(const uint8_t* secret, const std::string& advice) {
  const Fingerprint f = fingerprintOf(secret);
  std::lock_guard<std::mutex> lock(originsMutex());
  auto& list = origins();
  for (auto it = list.begin(); it != list.end(); ++it)
    if (it->fingerprint == f) {
      list.erase(it);
      break;
    }
  list.push_back({f, advice});
  if (list.size() > kMaxOrigins) list.pop_front();
}

std::string secretOriginAdvice(const uint8_t* secret) {
  const Fingerprint f = fingerprintOf(secret);
  std::lock_guard<std::mutex> lock(originsMutex());
  for (const Entry& e : origins())
    if (e.fingerprint == f) return e.advice;
  return "";
}

}  // namespace coil::auth
