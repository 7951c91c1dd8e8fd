// The object behind the opaque coilComm_t handle.
//
// It outlives the Communicator it wraps in two situations the C API allows:
// a non-blocking init still running (impl not yet set), and coilCommAbort
// called from another thread while a collective is blocked (the handle is
// freed only after that call has returned).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/communicator.h"

struct coilComm {
  std::atomic<bool> abortFlag{false};
  std::atomic<coilResult_t> initState{coilInProgress};
  std::unique_ptr<coil::Communicator> impl;  // valid once initState == coilSuccess
  std::thread initThread;                    // non-blocking init only
  std::atomic<int> inflight{0};              // API calls currently inside
  int rank = -1;
  int nranks = 0;

  std::mutex errorMutex;
  std::string lastError;
};
