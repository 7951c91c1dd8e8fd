#include "units.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

namespace coil_perf {

size_t parseBytes(const std::string& text, const char* flag) {
  const std::string what = std::string(flag) + ": '" + text + "' is not a size (e.g. 8, 64K, 64M, 1G)";
  if (text.empty() || text[0] == '-' || text[0] == '+') throw UsageError(what);
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || errno == ERANGE) throw UsageError(what);
  unsigned shift = 0;
  std::string suffix(end);
  if (suffix == "K" || suffix == "k" || suffix == "KiB" || suffix == "KB") shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB" || suffix == "MB") shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB" || suffix == "GB") shift = 30;
  else if (!suffix.empty() && suffix != "B" && suffix != "b") throw UsageError(what);
  if (value > (std::numeric_limits<size_t>::max() >> shift)) throw UsageError(what + ": too large");
  return static_cast<size_t>(value) << shift;
}

long parseInteger(const std::string& text, const char* flag, long minValue, long maxValue) {
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < minValue || value > maxValue) {
    throw UsageError(std::string(flag) + ": '" + text + "' must be an integer in [" +
                     std::to_string(minValue) + ", " + std::to_string(maxValue) + "]");
  }
  return value;
}

std::vector<size_t> sweepSizes(size_t minBytes, size_t maxBytes, double factor,
                               size_t stepBytes) {
  if (minBytes > maxBytes) {
    throw UsageError("-b " + std::to_string(minBytes) + " is larger than -e " +
                     std::to_string(maxBytes));
  }
  if (stepBytes == 0 && !(factor > 1.0)) throw UsageError("-f: the factor must be > 1");
  std::vector<size_t> sizes;
  size_t size = minBytes;
  for (;;) {
    sizes.push_back(size);
    size_t next;
    if (stepBytes > 0) {
      next = size + stepBytes;
    } else {
      // A zero minimum would never grow by multiplication: step to 1 first.
      double grown = size == 0 ? 1.0 : static_cast<double>(size) * factor;
      next = grown >= static_cast<double>(maxBytes) + 1.0 ? maxBytes + 1 : static_cast<size_t>(grown);
      if (next <= size) next = size + 1;
    }
    if (next > maxBytes || next < size) break;  // past the end, or wrapped
    size = next;
  }
  return sizes;
}

std::string humanBytes(size_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + kUnits[unit];
}

}  // namespace coil_perf
