#include "fuzz_util.h"

#include <dlfcn.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>

#include "bootstrap/wire.h"
#include "core/error.h"

// A fuzzer must stay on this machine: SocketAddress::parse hands the host
// to getaddrinfo, and a fuzzed host name would become a DNS query (slow,
// and traffic). Every fuzz executable therefore resolves numeric hosts only:
// this definition takes precedence over libc's (and the sanitizer's weak
// interceptor) and forwards with AI_NUMERICHOST set. A name fails as if it
// did not resolve, which parse() reports like any unknown host.
extern "C" int getaddrinfo(const char* node, const char* service, const addrinfo* hints,
                           addrinfo** res) {
  using Fn = int (*)(const char*, const char*, const addrinfo*, addrinfo**);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "getaddrinfo"));
  if (real == nullptr) return EAI_SYSTEM;
  addrinfo numeric{};
  if (hints != nullptr) numeric = *hints;
  numeric.ai_flags |= AI_NUMERICHOST;
  return real(node, service, &numeric, res);
}

namespace coil::fuzz {

void checkFailed(const char* file, int line, const char* what) {
  std::fprintf(stderr, "fuzz check failed: %s:%d: %s\n", file, line, what);
  std::abort();
}

void init() {
  setenv("COIL_DEBUG", "NONE", 1);
  // A fixed-root id takes its key from COIL_SECRET before anything else
  // (such as a per-user secret file): the targets stay off the disk.
  setenv("COIL_SECRET", "coil-fuzz", 1);
}

bool sameAddress(const SocketAddress& a, const SocketAddress& b) {
  if (a.family() != b.family() || a.length != b.length || a.port() != b.port()) return false;
  if (a.family() == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(&a.storage);
    const auto* y = reinterpret_cast<const sockaddr_in*>(&b.storage);
    return std::memcmp(&x->sin_addr, &y->sin_addr, sizeof x->sin_addr) == 0;
  }
  if (a.family() == AF_INET6) {
    const auto* x = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    const auto* y = reinterpret_cast<const sockaddr_in6*>(&b.storage);
    return std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0 &&
           x->sin6_scope_id == y->sin6_scope_id;
  }
  return false;
}

void checkAddressRoundTrips(const SocketAddress& a) {
  FUZZ_CHECK(a.family() == AF_INET || a.family() == AF_INET6);
  FUZZ_CHECK(a.length == (a.family() == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6)));
  // Binary: encode, decode, encode again.
  uint8_t wireBytes[wire::kAddressBytes];
  wire::putAddress(wireBytes, a);
  SocketAddress back;
  FUZZ_CHECK(wire::getAddress(wireBytes, &back));
  FUZZ_CHECK(sameAddress(a, back));
  uint8_t again[wire::kAddressBytes];
  wire::putAddress(again, back);
  FUZZ_CHECK(std::memcmp(wireBytes, again, sizeof again) == 0);
  // Text: what log lines and error messages show parses back to it. (Not
  // for a scope id on an IPv6 address that is not link-local: the kernel
  // never reports one, toString() shows it by interface name, and
  // getaddrinfo takes interface names for link-local addresses only.)
  if (a.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    if (in6->sin6_scope_id != 0 && !IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) &&
        !IN6_IS_ADDR_MC_LINKLOCAL(&in6->sin6_addr))
      return;
  }
  std::string text = a.toString();
  SocketAddress parsed;
  try {
    parsed = SocketAddress::parse(text);
  } catch (const Error& e) {
    std::fprintf(stderr, "toString gave '%s', which parse refuses: %s\n", text.c_str(), e.what());
    FUZZ_CHECK(!"toString() parses back");
  }
  if (!sameAddress(a, parsed))
    std::fprintf(stderr, "'%s' parses to '%s'\n", text.c_str(), parsed.toString().c_str());
  FUZZ_CHECK(sameAddress(a, parsed));
}

bool checkWireAddress(const uint8_t* p, SocketAddress* out) {
  SocketAddress a;
  if (!wire::getAddress(p, &a)) return false;
  uint8_t again[wire::kAddressBytes];
  wire::putAddress(again, a);
  FUZZ_CHECK(std::memcmp(p, again, sizeof again) == 0);
  checkAddressRoundTrips(a);
  if (out != nullptr) *out = a;
  return true;
}

void socketPair(Socket* a, Socket* b) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
    std::perror("socketpair");
    std::abort();
  }
  *a = Socket(sv[0]);
  *b = Socket(sv[1]);
}

void writeAll(const Socket& s, const void* bytes, size_t n) {
  if (n == 0) return;
  ssize_t k = ::send(s.fd(), bytes, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k != static_cast<ssize_t>(n)) {
    std::fprintf(stderr, "fuzz: writing %zu bytes to a socketpair wrote %zd\n", n, k);
    std::abort();
  }
}

std::vector<uint8_t> readAvailable(const Socket& s) {
  std::vector<uint8_t> out;
  uint8_t buf[4096];
  for (;;) {
    ssize_t k = ::recv(s.fd(), buf, sizeof buf, MSG_DONTWAIT);
    if (k <= 0) break;
    out.insert(out.end(), buf, buf + k);
  }
  return out;
}

}  // namespace coil::fuzz
