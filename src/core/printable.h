// Text from another process, made safe to show.
//
// An error message a peer sends ends up in coilGetLastError, in logs and on
// terminals. Raw, it could carry terminal escape sequences, forged log lines
// (newlines), bytes that are not UTF-8 (which break Python's decoding of the
// message), or be large. printableText keeps printable ASCII, spells every
// other byte as \xNN, and bounds the length.
#pragma once

#include <cstddef>
#include <string>

namespace coil {

/// The bytes as printable ASCII (0x20..0x7e, backslash excluded, kept; any
/// other byte written "\xNN"), at most `maxChars` characters (>= 32): longer
/// text is cut and ends with "... (N bytes)", N the length of the input.
std::string printableText(const void* data, size_t bytes, size_t maxChars);

}  // namespace coil
