#include "core/error.h"

#include <cstring>

namespace coil {

const char* resultName(coilResult_t code) {
  switch (code) {
    case coilSuccess: return "no error";
    case coilUnhandledCudaError: return "unhandled cuda error";
    case coilSystemError: return "unhandled system error (see coilGetLastError)";
    case coilInternalError: return "internal error - please report this issue";
    case coilInvalidArgument: return "invalid argument (see coilGetLastError)";
    case coilInvalidUsage: return "invalid usage (see coilGetLastError)";
    case coilRemoteError: return "remote process exited or there was a network error";
    case coilInProgress: return "operation in progress";
    case coilTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

void failErrno(const std::string& what, int err) {
  fail(coilSystemError, what, ": ", std::strerror(err), " (errno ", err, ")");
}

}  // namespace coil
