// The key material of a fixed-root rendezvous (fixed_root_secret.h).
#include "bootstrap/fixed_root_secret.h"

#include <optional>

#include "bootstrap/secret_file.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace coil {
namespace {

FixedRootSecret fromFile(const std::string& path, std::string material) {
  FixedRootSecret s;
  s.source = FixedRootSecret::Source::kFile;
  s.material = std::move(material);
  s.origin = "the secret file " + path;
  return s;
}

// The default file, or nullopt with `why` filled when the system will not
// give it to us (no such home, a read-only or inaccessible one): nobody
// asked for this file, so that is no reason to fail a launch that worked
// without it. A file that is there but unsafe (coilInvalidUsage) is an
// error, as ssh treats a key: using it could mean using a known secret.
std::optional<std::string> defaultFile(const std::string& path, std::string* why) {
  try {
    return readOrCreateSecretFile(path);
  } catch (const Error& e) {
    if (e.code() != coilSystemError) throw;
    *why = e.what();
    return std::nullopt;
  }
}

FixedRootSecret none(const std::string& why) {
  COIL_WARN(kBoot, "no secret for a rendezvous at a fixed address (", why,
            "): its key is derived from the root address and the job id, which anyone can "
            "compute, so the rendezvous and data connections are protected against accidents "
            "(another job on the same port) but not against attackers. Set COIL_SECRET to the "
            "same private value on every rank, or let every host see the same "
            "$HOME/.coil/secret (or COIL_SECRET_FILE), which coil creates with mode 0600");
  FixedRootSecret s;
  s.origin = why;
  return s;
}

}  // namespace

FixedRootSecret resolveFixedRootSecret() {
  if (auto value = env::get("COIL_SECRET")) {
    FixedRootSecret s;
    s.source = FixedRootSecret::Source::kEnvironment;
    s.material = *value;
    s.origin = "COIL_SECRET";
    return s;
  }
  if (auto named = env::get("COIL_SECRET_FILE")) {
    if (*named == "none") return none("COIL_SECRET is not set and COIL_SECRET_FILE=none");
    if (named->front() != '/')
      fail(coilInvalidUsage, "COIL_SECRET_FILE='", *named,
           "' is not an absolute path (every rank must find the same file, whatever its "
           "working directory); give an absolute path, or 'none' for no secret file");
    // Asked for by name: any problem with it is an error, never a fallback.
    return fromFile(*named, readOrCreateSecretFile(*named));
  }
  auto home = env::get("HOME");
  if (!home || home->front() != '/')
    return none("COIL_SECRET is not set, and HOME is unset or not an absolute path, so there "
                "is no $HOME/.coil/secret");
  std::string dir = *home;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string path = (dir == "/" ? "" : dir) + "/.coil/secret";
  std::string why;
  if (auto material = defaultFile(path, &why)) return fromFile(path, std::move(*material));
  return none("COIL_SECRET is not set and " + why);
}

std::string mismatchAdvice(const FixedRootSecret& secret) {
  switch (secret.source) {
    case FixedRootSecret::Source::kEnvironment:
      return "this rank's secret comes from COIL_SECRET: every rank needs the same value";
    case FixedRootSecret::Source::kFile:
      return "this rank's secret comes from " + secret.origin +
             ": ranks on hosts that do not share that file (no shared home directory) made "
             "their own and hold different secrets; give every host the same file, or set "
             "COIL_SECRET to its content on every rank";
    case FixedRootSecret::Source::kNone:
      break;
  }
  return "this rank has no secret (" + secret.origin +
         ") and uses the key derived from the address and job id: if other ranks set "
         "COIL_SECRET or read a secret file, every rank must";
}

}  // namespace coil
