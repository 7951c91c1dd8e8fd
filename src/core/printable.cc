#include "core/printable.h"

#include <algorithm>
#include <cstdint>

namespace coil {

std::string printableText(const void* data, size_t bytes, size_t maxChars) {
  static const char kHex[] = "0123456789abcdef";
  maxChars = std::max<size_t>(maxChars, 32);
  const auto* p = static_cast<const uint8_t*>(data);
  const std::string cut = "... (" + std::to_string(bytes) + " bytes)";
  std::string out;
  out.reserve(std::min(maxChars, 4 * bytes));
  size_t fits = 0;  // out.size() at the last point where the cut marker still fits
  for (size_t i = 0; i < bytes; ++i) {
    if (out.size() + cut.size() <= maxChars) fits = out.size();
    const uint8_t c = p[i];
    if (c >= 0x20 && c <= 0x7e && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
    if (out.size() > maxChars) {
      out.resize(fits);
      return out + cut;
    }
  }
  return out;
}

}  // namespace coil
