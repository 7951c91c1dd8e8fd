// Peer windows: device memory that every rank of a communicator maps, so
// that a collective on device buffers reads its peers' data on the GPU
// instead of staging it through host memory (algorithms/device_window_
// collectives.h runs every collective but the barrier on them).
//
// Made at init, when every rank has a GPU and all are on one host. Each
// rank allocates its window (two slots of COIL_PEER_WINDOW_BYTES) and the
// others map it, the first way that works on every rank (COIL_PEER_IPC,
// rank 0's, can name one):
//   1. cuMem: the window is exported as a POSIX file descriptor and sent to
//      every other rank over a Unix socket (net/fd_passing.h); ranks that
//      are threads of one process map each other's the same way.
//   2. legacy CUDA IPC: the window comes from cudaMalloc, and its 64-byte
//      handle is all-gathered over the communicator itself; each process
//      opens the others' (a thread of the same process uses the address).
//      For drivers without cuMem's POSIX handles, and wherever exporting,
//      passing or importing a descriptor fails. (Ranks in different network
//      namespaces count as different hosts, host_identity.h, and have no
//      peer windows at all.)
// After each step the ranks agree: if any rank could not take part, none
// uses that way. When neither works (no GPU memory sharing, mapping refused
// between two GPUs without peer access, COIL_PEER_WINDOW_BYTES=0), device
// calls are staged through host memory as before; init says why at INFO.
//
// Everything is allocated and mapped at init: an allocation later could
// wait on a stream that waits on this communicator (staged_stream.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

#include "device/device.h"
#include "algorithms/device_window_collectives.h"

struct coilComm;

namespace coil {
class Communicator;
struct CollectiveCall;
struct P2pCall;
}

namespace coil::api {

struct PeerWindows {
  size_t slotBytes = 0;                         // of each of a window's two slots
  size_t minBytes = 0;                          // calls from this size use the windows
  std::vector<device::SharedMemory> mappings;   // by rank: the window as mapped here
  std::vector<algo::DeviceWindow> windows;      // by rank
  const char* sharing = "";                     // the way they were shared, for logs and tests
  int rank = -1;                                // this rank: mappings[rank] is its own window
  // Legacy IPC with a rank in another process: that process opened this
  // rank's window, which must outlive its mapping there (shared_teardown.h).
  // The same on every rank. (cuMem's mappings hold the memory themselves.)
  bool openedElsewhere = false;
  std::atomic<uint64_t> callsRun{0};            // collectives enqueued on the windows (for tests)
  std::atomic<uint64_t> p2pRun{0};              // batches of sends and receives (for tests)
  PeerWindows() = default;
  PeerWindows(const PeerWindows&) = delete;
  PeerWindows& operator=(const PeerWindows&) = delete;
  ~PeerWindows();
  /// Frees every mapping (own and peers'), leaving empty ones.
  void unmap() noexcept;
  /// Closes the peers' windows as mapped here, keeping this rank's own.
  void closePeers() noexcept;
};

/// At init, on every rank, once the communicator is connected: collective.
/// Leaves comm->peerWindows null where the windows are not used.
void attachPeerWindows(coilComm* comm);

/// True on every rank when `mine` is true on every rank (an all-gather
/// over the bootstrap, Communicator::allGatherAtSetup): how the ranks agree
/// on a way to share device memory, for the windows made at init and for
/// registered windows alike.
bool everyRankAgrees(Communicator& c, bool mine);

/// This rank's COIL_PEER_MIN_BYTES (default 256 KiB): device calls of at
/// least this size read the peers' memory. Rank 0's value counts; the
/// callers broadcast or all-gather it.
size_t peerMinBytesHere();

/// True when `call` (on device buffers, alone or in a group) runs on the peer
/// windows: any collective but the barrier, with a built-in op where it
/// reduces, whose largest buffer (a rank's n blocks, for the collectives
/// with blocks) holds minBytes or more. Rank 0's minBytes and the call's
/// arguments only, so the same answer on every rank for the same call.
bool runsOnPeerWindows(const coilComm* comm, const CollectiveCall& call);

/// True when a send or receive of `call` in a group on device buffers moves
/// through the peer windows (algorithms/device_window_p2p.h): its message
/// holds minBytes or more (and at least a byte). A send and its receive
/// have one size, so both ranks answer alike.
bool sendsThroughPeerWindows(const coilComm* comm, const P2pCall& call);

}  // namespace coil::api
