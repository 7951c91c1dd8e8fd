// Thin helpers around coil's C API for the work bodies (worker thread).
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "coil.h"
#include "tensor_args.h"

namespace coil_torch {

/// Throws c10::DistBackendError("coil backend: <call>: <what> (<code>): <coil's
/// message>") unless `result` is coilSuccess; <what> is "Timed out" for a
/// timeout, "a peer exited or its connection closed" for a remote error, else
/// "failed". The message is this thread's
/// last coil error, which stays readable even if the comm was aborted.
void check(coilResult_t result, const char* call);

/// A c10::DistBackendError carrying `message`, as an exception_ptr (to
/// complete a work with).
std::exception_ptr backendError(const std::string& message);

/// The comm handle as a work body holds it. get() refuses (throws
/// c10::DistBackendError) once the backend has begun to abort: coilCommAbort
/// frees the handle, so a body must not start another call with it. (A call
/// already inside coil is safe: coil waits for it before freeing.)
class CommRef {
 public:
  CommRef(coilComm_t comm, std::shared_ptr<const std::atomic<bool>> aborting)
      : comm_(comm), aborting_(std::move(aborting)) {}
  coilComm_t get() const;

 private:
  coilComm_t comm_;
  std::shared_ptr<const std::atomic<bool>> aborting_;
};

/// The coil operator for a Reduction: the plain one, or for PREMUL_SUM one
/// made with coilRedOpCreatePreMulSum on `comm` and destroyed with the scope.
/// When the scope is left by an exception (the coil call failed) it is not
/// destroyed: the comm may have been aborted and freed by then, and a failed
/// comm's ops go with it.
class ScopedReduceOp {
 public:
  ScopedReduceOp(const Reduction& reduction, at::ScalarType dtype, coilComm_t comm);
  ~ScopedReduceOp();
  ScopedReduceOp(const ScopedReduceOp&) = delete;
  ScopedReduceOp& operator=(const ScopedReduceOp&) = delete;
  coilRedOp_t get() const { return op_; }

 private:
  coilComm_t comm_;
  coilRedOp_t op_;
  bool created_ = false;
  int uncaughtAtStart_;
};

/// The calls of one coil group: the constructor starts it (throwing if coil
/// refuses), add() notes each call's result, end() closes it and throws the
/// first refused call's error with its own message (a later call or
/// coilGroupEnd would replace coilGetLastError's text), else coilGroupEnd's.
/// A group left without end() (an exception) is closed by the destructor,
/// so the thread never stays inside it.
class CoilGroup {
 public:
  CoilGroup();
  ~CoilGroup();
  CoilGroup(const CoilGroup&) = delete;
  CoilGroup& operator=(const CoilGroup&) = delete;
  /// `call` names the call in the error, e.g. "coilSend to rank 2".
  void add(coilResult_t result, const std::string& call);
  bool failed() const { return firstError_ != coilSuccess; }
  void end();

 private:
  bool open_ = true;
  coilResult_t firstError_ = coilSuccess;
  std::string firstCall_, firstMessage_;
};

/// One send or receive of a tensor's memory (host, or device on opStream()).
struct Transfer {
  bool isSend;
  void* data;
  Elements elements;
  int peer;
};

/// Runs `transfers` as one coil group (coilGroupStart ... coilGroupEnd), so
/// they complete in any order. The group is always closed, even when one
/// call is refused; the first error is thrown.
void runTransferGroup(const std::vector<Transfer>& transfers, coilComm_t comm);

}  // namespace coil_torch
