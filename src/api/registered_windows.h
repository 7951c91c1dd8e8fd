// Windows: device buffers that every rank of a communicator registers
// together (coilCommWindowRegister, as ncclCommWindowRegister) and every
// other rank on the host maps, so that an all-reduce on them reads the
// peers' inputs and outputs where they are, with no copy into a slot; so
// do all-gathers, reduce-scatters, broadcasts, reduces and all-to-alls
// (algorithms/registered_collectives.h).
//
// Registration is collective. Each rank finds the CUDA allocation holding
// its buffer and exports it (legacy IPC: cudaIpcGetMemHandle of the
// allocation's base, and the buffer's offset in it); the records are
// all-gathered over the communicator; each process opens the others'
// allocations (once per process and allocation, refcounted: CUDA maps an
// allocation once per process) and a thread of the same process uses the
// address as is. Then the ranks agree: where any rank could not export or
// map, or the ranks are not all GPUs of one host, the window is registered
// but not mapped, and calls on it take the other paths (peer windows, or
// staging through host memory); INFO says why. Every rank's window has the
// same size (checked), so a rank that reads its peers at its own offsets
// never reads past their windows.
//
// Registration and deregistration first wait for the communicator's queued
// device calls (they use the host engine, in program order), and
// deregistration unmaps only after every rank has arrived, when no call
// that reads the window is left anywhere.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "device/device.h"

struct coilComm;

namespace coil {
struct CollectiveCall;
}

namespace coil::api {
struct CallBuffers;
}

/// The object behind coilWindow_t: one rank's view of one window.
struct coilWindow {
  uint32_t id = 0;  // the same on every rank: the order of registration
  uint8_t* base = nullptr;
  size_t bytes = 0;
  // Every rank's buffer as mapped in this process (this rank's own at its
  // index); empty where the window is not mapped.
  std::vector<const uint8_t*> byRank;
  // The peers' allocations this window opened (released at deregistration).
  std::vector<coil::device::IpcHandle> opened;
  int device = -1;
  coilWindow() = default;
  coilWindow(const coilWindow&) = delete;
  coilWindow& operator=(const coilWindow&) = delete;
  ~coilWindow();
  bool mapped() const { return !byRank.empty(); }
  /// Where [p, p + n) starts in this rank's buffer; nothing if it is not inside.
  std::optional<size_t> offsetOf(const void* p, size_t n) const;
};

namespace coil::api {

/// A communicator's windows (coilComm::windows).
struct RegisteredWindows {
  std::vector<std::unique_ptr<coilWindow>> live;
  uint32_t nextId = 1;
  size_t minBytes = 0;  // rank 0's COIL_PEER_MIN_BYTES, at the latest registration
  std::atomic<uint64_t> callsRun{0};  // calls enqueued on windows (for tests)
};

/// coilCommWindowRegister / coilCommWindowDeregister (collective). A rank
/// whose arguments are bad (`win` NULL included) still takes part, so that
/// its peers fail at once, naming it, instead of waiting for it.
void registerWindow(coilComm* comm, void* buff, size_t size, int flags, coilWindow** win);
void deregisterWindow(coilComm* comm, coilWindow* win);

/// Where a call's buffers that its peers read sit in mapped windows (null
/// for a buffer they do not read).
struct RegisteredCall {
  const coilWindow* send;
  size_t sendOffset;
  const coilWindow* recv;
  size_t recvOffset;
};
/// The windows of a call that runs in place on them: an all-reduce whose
/// input and output lie in mapped windows, an all-gather or a broadcast
/// whose output does, a reduce-scatter, a reduce or an all-to-all whose
/// input does (built-in ops, at least minBytes read, not in a
/// group, at most 8 ranks); nothing for any other call (a gather, a
/// scatter: window_programs.h says why).
/// Local: the first barrier of the call checks that every rank found the
/// same (algorithms/registered_collectives.h).
std::optional<RegisteredCall> registeredCallOf(const coilComm* comm, const CollectiveCall& call,
                                               const CallBuffers& use);

}  // namespace coil::api
