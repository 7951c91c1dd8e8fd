// Which other ranks of a communicator call on this rank's GPU, and how.
//
// Ranks that are threads of one process on one GPU share its hardware
// queues, so their calls on device buffers run in host order
// (device/staged_stream.h). Ranks that are processes on one GPU keep stream
// order, but pay for the sharing: without MPS the GPU runs one process's
// context at a time and switches between them in time slices, and every
// call needs each rank's stream to move. On an H100 (2026-11-27) an
// all-reduce of 64 B to 1 KiB took ~265 µs with 2 processes and ~470 µs
// with 4, in stream order and in host order alike; under MPS (one context
// for all) 25 and 37 µs, as ranks that are threads (~18 µs). So init says
// so, once per process (docs/performance.md §4.13).
//
// A GPU is known by its UUID, not its ordinal: CUDA_VISIBLE_DEVICES gives
// the same GPU different ordinals in different processes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace coil {

/// Where one rank runs and on which GPU (from its init record).
struct RankGpu {
  uint64_t hostHash;  // localHostHash()
  int32_t pid;
  std::optional<std::array<uint8_t, 16>> uuid;  // none: this rank has no device
};

struct GpuShare {
  bool withThreads = false;  // another rank of this process is on this GPU
  int processes = 1;         // processes with a rank on this GPU (this one included)
  bool lowestRank = true;    // no lower rank is on this GPU
};

/// This rank's share of its GPU, from every rank's RankGpu (indexed by
/// rank). A rank without a GPU shares nothing.
GpuShare gpuShare(const std::vector<RankGpu>& all, int rank);

/// How the ranks spread over processes; the same on every rank.
struct ProcessSpread {
  bool severalProcesses = false;  // legacy CUDA IPC: each process opens the others' memory
  // ... and one process holds several ranks, so one thread may destroy
  // them in turn (api/shared_teardown.h: destroy cannot wait then).
  bool threadsAmongProcesses = false;
};
ProcessSpread processSpread(const std::vector<RankGpu>& all);

/// True when every rank has a GPU and all run on one host: then their
/// device memory can be mapped across processes (CUDA IPC), and device
/// all-reduces can read it there (api/peer_windows.h). The same answer on
/// every rank.
bool allOnOneHostWithGpus(const std::vector<RankGpu>& all);

}  // namespace coil
