// The object behind the opaque coilComm_t handle.
//
// It outlives the Communicator it wraps in two situations the C API allows:
// a non-blocking init still running (impl not yet set), and coilCommAbort
// called from another thread while a collective is blocked (the handle is
// freed only after that call has returned).
#pragma once

#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "api/peer_windows.h"
#include "api/registered_windows.h"
#include "comm/communicator.h"
#include "device/staged_stream.h"

struct coilComm {
  std::atomic<bool> abortFlag{false};
  std::atomic<coilResult_t> initState{coilInProgress};
  std::unique_ptr<coil::Communicator> impl;  // valid once initState == coilSuccess
  std::thread initThread;                    // non-blocking init only
  std::atomic<int> inflight{0};              // API calls currently inside
  int rank = -1;
  int nranks = 0;
  int device = -1;  // the current CUDA device at init; -1 without one
  // The process that made it, for the message a forked child gets when it
  // uses the handle (handle_registry.cc).
  pid_t ownerPid = ::getpid();

  // Calls on device buffers (device_calls.h); made at init where a CUDA
  // device is usable. Reset before impl: its destructor runs the bodies
  // still queued, which use impl.
  std::unique_ptr<coil::device::StagedStream> staged;
  // COIL_DEVICE_ORDER=stream or host, read at init; none: chosen per
  // communicator (device_calls.cc).
  std::optional<coil::device::StagedStream::Order> forcedOrder;
  // The peers' device memory, mapped at init (api/peer_windows.h); null
  // where device collectives are staged through host memory. Reset after
  // `staged` (whose queued calls use it) and before impl.
  std::unique_ptr<coil::api::PeerWindows> peerWindows;
  // The windows the application registered (api/registered_windows.h);
  // null until the first. Reset after `staged`, like peerWindows.
  std::unique_ptr<coil::api::RegisteredWindows> windows;
  // The first error of such a call after it returned (coilCommGetAsyncError).
  std::atomic<coilResult_t> deviceError{coilSuccess};

  std::mutex errorMutex;
  std::string lastError;
};
