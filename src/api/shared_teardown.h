// A communicator's device memory that other processes mapped, released at
// destroy in the order CUDA's legacy IPC needs.
//
// Memory that another process opened with cudaIpcOpenMemHandle must not be
// freed before that process closed it (cudaIpcCloseMemHandle); CUDA leaves
// the result undefined. Two kinds of memory are shared that way: a rank's
// own peer window under legacy IPC (peer_windows.h), which coil frees, and
// the application's buffers behind its windows (registered_windows.h),
// which the application frees, as soon as destroy returns. (cuMem's
// mappings hold the memory they map, so the peer windows shared as cuMem
// descriptors need nothing of this.)
//
// So where another process opened either, destroy first closes what this
// rank opened, then waits on a barrier for every rank to have done the
// same, and only then frees its own window: destroy is then collective, as
// NCCL's ncclCommDestroy is within a node. The barrier has the
// communicator's deadline. Where it cannot complete (the communicator was
// aborted or broken, a peer died or never called destroy), the window is
// left allocated until the process exits instead, and a warning says so:
// a leak, never memory freed under a peer.
//
// One case never waits: ranks of several processes where some process
// holds several ranks. There one thread may destroy its process's ranks
// one after another (NCCL's pattern for several GPUs per process), and a
// barrier in the first destroy would wait for ranks its thread reaches
// only after it. The windows are then left allocated until exit, with the
// warning.
#pragma once

struct coilComm;

namespace coil::api {

/// Releases comm->peerWindows and comm->windows (and the mappings of the
/// peers' memory they hold); at destroy and abort, before the
/// communicator itself.
void releaseSharedDeviceMemory(coilComm* comm) noexcept;

}  // namespace coil::api
