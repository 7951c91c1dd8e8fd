// coil::Error — the one exception type used inside coil.
//
// Inside the library, failures throw; the C boundary (src/api) catches and
// turns them into a coilResult_t plus the message coilGetLastError returns.
// That keeps error paths out of the algorithms and transports.
#pragma once

#include <stdexcept>
#include <string>

#include "coil.h"

namespace coil {

class Error : public std::runtime_error {
 public:
  Error(coilResult_t code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  coilResult_t code() const noexcept { return code_; }

 private:
  coilResult_t code_;
};

/// Throws Error(code, message) built from streamable parts.
template <typename... Parts>
[[noreturn]] void fail(coilResult_t code, const Parts&... parts);

/// Static text for a result code (coilGetErrorString).
const char* resultName(coilResult_t code);

/// Throws coilSystemError naming `what` and errno's text.
[[noreturn]] void failErrno(const std::string& what, int err);

}  // namespace coil

#include <sstream>
namespace coil {
template <typename... Parts>
[[noreturn]] void fail(coilResult_t code, const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(code, os.str());
}
}  // namespace coil
