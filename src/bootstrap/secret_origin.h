// Where a communicator secret came from, remembered so that an
// authentication failure can say what to check.
//
// auth.h only sees 16 bytes. When those bytes were derived from a secret
// file, the likeliest reason for a mismatch is a host that does not share
// the file (no shared home directory); a generic "wrong secret" sends the
// user hunting in the wrong place. Whoever derives a secret notes its
// origin here; auth.cc appends the note to its failure messages.
//
// Only a fingerprint of the secret is kept (not the secret itself), for at
// most kMaxOrigins secrets: the most recent ones.
#pragma once

#include <cstdint>
#include <string>

namespace coil::auth {

inline constexpr size_t kMaxOrigins = 32;

/// Remembers `advice` for `secret` (kSecretBytes). Thread-safe.
void noteSecretOrigin(const uint8_t* secret, const std::string& advice);
/// The advice noted for `secret`, or "" if none. Thread-safe.
std::string secretOriginAdvice(const uint8_t* secret);

}  // namespace coil::auth
