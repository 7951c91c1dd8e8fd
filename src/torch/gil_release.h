// Releasing the Python GIL while a C++ thread blocks on another thread that
// may need it.
#pragma once

#include <Python.h>

namespace coil_torch {

/// Releases the GIL for the scope if this thread holds it. Joining a thread
/// (the worker, a completion thread) with the GIL held deadlocks when that
/// thread is running a future's Python callback (fut.then(...)) that is
/// waiting for the GIL.
class GilReleasedIfHeld {
 public:
  GilReleasedIfHeld() {
    if (Py_IsInitialized() && PyGILState_Check()) state_ = PyEval_SaveThread();
  }
  ~GilReleasedIfHeld() {
    if (state_) PyEval_RestoreThread(state_);
  }
  GilReleasedIfHeld(const GilReleasedIfHeld&) = delete;
  GilReleasedIfHeld& operator=(const GilReleasedIfHeld&) = delete;

 private:
  PyThreadState* state_ = nullptr;
};

}  // namespace coil_torch
