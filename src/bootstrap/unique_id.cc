// coilUniqueId's 128 bytes, and the two ways an id comes to be: a fresh
// root (coilGetUniqueId) or a fixed, known-in-advance root address.
//
// Layout (big-endian):
//   0  u32  magic 0xC0111D00
//   4  u16  version (1)
//   6  u16  flags (bit 0: rootHostedByRank0)
//   8  24 B root address (wire.h)
//  32  16 B secret
//  48  u64  nonce
//  56  8 B  first bytes of SHA-256 of bytes 0..55: catches corruption
//  64  zero
#include <ifaddrs.h>
#include <net/if.h>

#include <cstring>

#include "net/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/fixed_root_secret.h"
#include "bootstrap/secret_origin.h"
#include "net/sha256.h"
#include "bootstrap/wire.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace coil {
namespace {

constexpr uint32_t kIdMagic = 0xC0111D00;
constexpr uint16_t kIdVersion = 1;
constexpr uint16_t kFlagRootHostedByRank0 = 1;
constexpr size_t kChecksumOffset = 56;
constexpr size_t kUsedBytes = 64;
static_assert(kUsedBytes <= COIL_UNIQUE_ID_BYTES);

constexpr int64_t kDefaultRootTimeoutMs = 30 * 60 * 1000;

// The interface address to host a root on when nothing is configured.
SocketAddress defaultRootAddress() {
  ifaddrs* list = nullptr;
  SocketAddress out = SocketAddress::parse("127.0.0.1:0");
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    std::memset(&out.storage, 0, sizeof out.storage);
    std::memcpy(&out.storage, i->ifa_addr, sizeof(sockaddr_in));
    out.length = sizeof(sockaddr_in);
    out.setPort(0);
    break;
  }
  freeifaddrs(list);
  return out;
}

[[noreturn]] void rejectId(const std::string& why) {
  fail(coilInvalidArgument, "coilUniqueId is not valid (", why,
       "): pass every rank the unchanged bytes that coilGetUniqueId produced");
}

}  // namespace

coilUniqueId encodeUniqueId(const UniqueIdData& data) {
  coilUniqueId id;
  std::memset(&id, 0, sizeof id);
  auto* p = reinterpret_cast<uint8_t*>(id.internal);
  wire::putU32(p, kIdMagic);
  wire::putU16(p + 4, kIdVersion);
  wire::putU16(p + 6, data.rootHostedByRank0 ? kFlagRootHostedByRank0 : 0);
  wire::putAddress(p + 8, data.root);
  std::memcpy(p + 32, data.secret, sizeof data.secret);
  wire::putU64(p + 48, data.nonce);
  Sha256Digest check = sha256(p, kChecksumOffset);
  std::memcpy(p + kChecksumOffset, check.data(), kUsedBytes - kChecksumOffset);
  return id;
}

UniqueIdData decodeUniqueId(const coilUniqueId& id) {
  const auto* p = reinterpret_cast<const uint8_t*>(id.internal);
  if (wire::getU32(p) != kIdMagic) rejectId("bad magic");
  uint16_t version = wire::getU16(p + 4);
  if (version != kIdVersion)
    rejectId("version " + std::to_string(version) + ", this coil reads version " +
             std::to_string(kIdVersion));
  Sha256Digest check = sha256(p, kChecksumOffset);
  if (std::memcmp(p + kChecksumOffset, check.data(), kUsedBytes - kChecksumOffset) != 0)
    rejectId("checksum mismatch: the bytes were altered");
  for (size_t i = kUsedBytes; i < COIL_UNIQUE_ID_BYTES; ++i)
    if (p[i] != 0) rejectId("reserved bytes are not zero");
  uint16_t flags = wire::getU16(p + 6);
  if ((flags & ~kFlagRootHostedByRank0) != 0) rejectId("unknown flags");
  UniqueIdData data;
  if (!wire::getAddress(p + 8, &data.root)) rejectId("bad root address");
  std::memcpy(data.secret, p + 32, sizeof data.secret);
  data.nonce = wire::getU64(p + 48);
  data.rootHostedByRank0 = (flags & kFlagRootHostedByRank0) != 0;
  return data;
}

UniqueIdData uniqueIdForFixedRoot(const SocketAddress& root, const std::string& jobKey) {
  // The key material is what keeps strangers out: COIL_SECRET or the
  // per-user secret file. Without it the secret below is a function of
  // public facts (fixed_root_secret.h warns then).
  const FixedRootSecret key = resolveFixedRootSecret();
  // Each field is length-prefixed so that no two inputs hash alike. The
  // material is the same field whichever source gave it, so that
  // COIL_SECRET=$(cat ~/.coil/secret) agrees with a rank that reads the file.
  Sha256 h;
  auto field = [&h](const std::string& text) {
    uint8_t length[4];
    wire::putU32(length, static_cast<uint32_t>(text.size()));
    h.update(length, sizeof length);
    h.update(text);
  };
  field("coil-fixed-root");
  field(key.material);
  field(root.toString());
  field(jobKey);
  Sha256Digest digest = h.finish();

  UniqueIdData data;
  data.root = root;
  std::memcpy(data.secret, digest.data(), sizeof data.secret);
  data.nonce = wire::getU64(digest.data() + sizeof data.secret);
  data.rootHostedByRank0 = true;
  // So that a failed authentication can say what to check (secret_origin.h).
  auth::noteSecretOrigin(data.secret, mismatchAdvice(key));
  return data;
}

int64_t rootTimeoutMsFromEnv() {
  return env::getInt("COIL_TIMEOUT_MS", 1, INT64_MAX / 2).value_or(kDefaultRootTimeoutMs);
}

UniqueIdData makeLocalUniqueId() {
  SocketAddress bind = SocketAddress::parse("127.0.0.1:0");
  return startRoot(bind, rootTimeoutMsFromEnv());
}

UniqueIdData makeUniqueId() {
  if (auto commId = env::get("COIL_COMM_ID")) {
    SocketAddress root;
    try {
      root = SocketAddress::parse(*commId);
    } catch (const Error& e) {
      fail(coilInvalidUsage, "COIL_COMM_ID: ", e.what());
    }
    COIL_INFO(kBoot, "unique id for the fixed root COIL_COMM_ID=", root.toString(),
              " (rank 0 will host it)");
    return uniqueIdForFixedRoot(root, "");
  }
  SocketAddress bind;
  if (auto ifname = env::get("COIL_SOCKET_IFNAME"))
    bind = SocketAddress::ofInterface(*ifname);
  else
    bind = defaultRootAddress();
  bind.setPort(0);
  return startRoot(bind, rootTimeoutMsFromEnv());
}

}  // namespace coil
