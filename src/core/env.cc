#include "core/env.h"

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "core/variables.h"

namespace coil::env {

std::optional<std::string> get(const char* name) {
  // Every COIL_ variable must be in the table (variables.cc): it is what the
  // init-time check and README's table are checked against.
  if (std::string_view(name).starts_with("COIL_") && findVariable(name) == nullptr)
    fail(coilInternalError, name, " is read but not registered in src/core/variables.cc");
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::optional<int64_t> getInt(const char* name, int64_t minValue, int64_t maxValue) {
  auto text = get(name);
  if (!text) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text->c_str(), &end, 10);
  if (errno != 0 || end == text->c_str() || *end != '\0' || v < minValue || v > maxValue)
    fail(coilInvalidUsage, name, "='", *text, "' is not an integer in [", minValue, ", ", maxValue,
         "]");
  return v;
}

}  // namespace coil::env
