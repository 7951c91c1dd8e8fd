// Where the key material of a fixed-root rendezvous (COIL_COMM_ID, a
// launcher's environment) comes from.
//
// Such ranks cannot be handed a fresh random secret by coil, so they must
// find the same private bytes on their own. In order:
//   1. COIL_SECRET, if set: the value, as given.
//   2. The per-user secret file (secret_file.h): COIL_SECRET_FILE if set (an
//      absolute path; "none" skips this step), else $HOME/.coil/secret,
//      created on first use. An explicitly named file that cannot be read
//      or created is an error; the default one that the system will not
//      give us (no HOME, a read-only or inaccessible home) falls through to
//      3. A file that exists but is unsafe (readable by others, not ours) is
//      always an error.
//   3. Nothing: the secret is derived from the root address and job id
//      alone, which anyone can compute. One WARN line says so.
#pragma once

#include <string>

namespace coil {

struct FixedRootSecret {
  enum class Source { kEnvironment, kFile, kNone };
  Source source = Source::kNone;
  std::string material;  // hashed into the secret; empty for kNone
  /// For messages: "COIL_SECRET", "the secret file /home/u/.coil/secret", or
  /// why there was none.
  std::string origin;
};

/// Resolves the key material as described above. Throws coilInvalidUsage or
/// coilSystemError (naming the variable or file) when a configured source
/// is unusable; logs the warning when falling back to nothing.
FixedRootSecret resolveFixedRootSecret();

/// What a rank should check when authentication with this secret's origin
/// fails, e.g. that every host sees the same secret file. For error messages.
std::string mismatchAdvice(const FixedRootSecret& secret);

}  // namespace coil
