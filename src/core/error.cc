#include "core/error.h"

#include <cstring>

namespace coil {

void failErrno(const std::string& what, int err) {
  fail(coilSystemError, what, ": ", std::strerror(err), " (errno ", err, ")");
}

}  // namespace coil
