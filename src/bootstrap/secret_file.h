// The per-user secret file: key material that only this user can read, on
// the home directory that the hosts of a cluster share.
//
// A rendezvous at a fixed address (a launcher's MASTER_ADDR, COIL_COMM_ID)
// has no channel to hand a fresh random secret to every rank. The file is
// that channel: every rank of the user's job reads the same bytes, and a
// stranger on the network cannot.
//
// The checks follow ssh's for private keys: a file that someone else could
// read or write is refused, not silently used, because its secret may
// already be known.
#pragma once

#include <optional>
#include <string>

namespace coil {

/// Shortest and longest content accepted (after trailing whitespace is
/// stripped). 16 bytes is the size of the derived secret itself.
inline constexpr size_t kMinSecretFileBytes = 16;
inline constexpr size_t kMaxSecretFileBytes = 4096;

/// The secret in `path` (an absolute path) with trailing whitespace
/// removed; nullopt if no file is there.
///
/// Throws coilInvalidUsage, naming the path and the fix, when the file is
/// not a regular file, is not owned by this user (effective uid), can be
/// read or written by group or others, or holds fewer than
/// kMinSecretFileBytes or more than kMaxSecretFileBytes. Throws
/// coilSystemError naming the path when it exists but cannot be read.
std::optional<std::string> readSecretFile(const std::string& path);

/// Creates the file at `path` unless one is there: 32 random bytes
/// (getrandom) as 64 hex digits and a newline, mode 0600, in its directory,
/// which is made with mode 0700 if missing (only the last component). The
/// file appears whole or not at all, and never replaces another: ranks that
/// start at once, on one host or on several sharing the directory, all end
/// up reading the one file that won the race. Throws coilSystemError naming
/// the path when it cannot be created.
void createSecretFile(const std::string& path);

/// readSecretFile, after createSecretFile if the file is missing.
std::string readOrCreateSecretFile(const std::string& path);

}  // namespace coil
