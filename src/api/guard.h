// The C boundary: every exported function is one call to guarded(), which
// turns coil::Error (and anything else thrown) into a coilResult_t and stores
// the message for coilGetLastError. No exception crosses into C.
#pragma once

#include <string>

#include "api/handle.h"
#include "api/handle_registry.h"
#include "core/error.h"

namespace coil::api {

/// Stores `message` as the last error of `comm` (may be null) and of this thread.
void recordError(coilComm* comm, const std::string& message);
/// This thread's last error message.
const char* threadLastError();

template <typename Body>
coilResult_t guarded(const char* function, coilComm* comm, Body&& body) noexcept {
  try {
    body();
    return coilSuccess;
  } catch (const Error& e) {
    recordError(comm, std::string(function) + ": " + e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    recordError(comm, std::string(function) + ": out of memory");
    return coilSystemError;
  } catch (const std::exception& e) {
    recordError(comm, std::string(function) + ": internal error: " + e.what());
    return coilInternalError;
  } catch (...) {
    recordError(comm, std::string(function) + ": internal error: unknown exception");
    return coilInternalError;
  }
}

/// Marks an API call in flight on `comm` for its lifetime, so coilCommAbort
/// or coilCommDestroy from another thread waits for it before freeing the
/// handle. Taken before the handle is inspected: a NULL, destroyed or
/// unknown handle throws coilInvalidArgument here.
class InFlight {
 public:
  explicit InFlight(coilComm* comm) : comm_(comm) { enter(comm_); }
  ~InFlight() { leave(comm_); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  coilComm* comm_;
};

/// The communicator behind `comm`, or throws the right error: NULL handle,
/// init still running, init failed, or aborted.
Communicator& usable(coilComm* comm);

}  // namespace coil::api
