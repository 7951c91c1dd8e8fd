// Reading COIL_* (and launcher) environment variables, with validation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace coil::env {

/// The variable's value, or nullopt when unset or empty. A COIL_ name must be
/// registered in core/variables.cc; reading one that is not throws
/// coilInternalError naming it.
std::optional<std::string> get(const char* name);
/// An integer variable; throws coilInvalidUsage naming it if not a number
/// within [minValue, maxValue].
std::optional<int64_t> getInt(const char* name, int64_t minValue, int64_t maxValue);

}  // namespace coil::env
