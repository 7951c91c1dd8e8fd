// Peer windows: device memory that every rank of a communicator maps, so
// that a device all-reduce reads its peers' data on the GPU instead of
// staging it through host memory (algorithms/device_window_allreduce.h
// runs it).
//
// Made at init, when every rank has a GPU and all are on one host: each
// rank allocates its window (two slots of COIL_PEER_WINDOW_BYTES) with
// cuMem, exports it as a POSIX file descriptor, and sends that to every
// other rank over a Unix socket (net/fd_passing.h); each maps the others'.
// Ranks that are threads of one process map each other's the same way.
// The ranks then agree: if any rank could not take part (no cuMem, no
// POSIX handles, mapping refused between two GPUs without peer access,
// COIL_PEER_WINDOW_BYTES=0), none uses the windows, and device calls are
// staged through host memory as before; init says why at INFO.
//
// Everything is allocated and mapped at init: an allocation later could
// wait on a stream that waits on this communicator (staged_stream.h).
#pragma once

#include <cstddef>
#include <vector>

#include "device/device.h"
#include "algorithms/device_window_allreduce.h"

struct coilComm;

namespace coil {
struct CollectiveCall;
}

namespace coil::api {

struct PeerWindows {
  size_t slotBytes = 0;                         // of each of a window's two slots
  size_t minBytes = 0;                          // calls from this size use the windows
  std::vector<device::SharedMemory> mappings;   // by rank: the window as mapped here
  std::vector<algo::DeviceWindow> windows;      // by rank
  PeerWindows() = default;
  PeerWindows(const PeerWindows&) = delete;
  PeerWindows& operator=(const PeerWindows&) = delete;
  ~PeerWindows();
};

/// At init, on every rank, once the communicator is connected: collective.
/// Leaves comm->peerWindows null where the windows are not used.
void attachPeerWindows(coilComm* comm);

/// True when `call` (on device buffers, outside a group) runs on the peer
/// windows: an all-reduce with a built-in op of at least minBytes. The same
/// answer on every rank for the same call.
bool runsOnPeerWindows(const coilComm* comm, const CollectiveCall& call, size_t bytes);

}  // namespace coil::api
