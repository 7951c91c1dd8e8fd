// The collectives on device buffers between ranks that map each other's
// device memory: processes of one host through CUDA IPC, or threads of one
// process. Every rank owns a window of two slots that every rank can read
// (api/peer_windows.h makes and maps them).
//
// They are window programs (window_programs.h): the all-reduce is the shm
// window's slice all-reduce, the same program, and the other collectives
// the peer programs, which no host engine runs. A third executor beside
// WindowExecutor and WindowTrace runs them: DeviceWindowExecutor turns each
// of a program's steps into GPU work on the caller's stream (put and
// copyOut are device copies, a reduction is one chain kernel over the n
// terms in mapped peer memory, in rank order, so the bits are the host
// engine's: device::reduceChainAsync) and each wait into a host step: a
// barrier of the communicator's host engine, run by device::StagedStream
// between the stream's phases. No kernel waits for another rank's kernel,
// which on one GPU shared by processes without MPS would be a deadlock (the
// GPU runs one context at a time). The all-reduce, per piece of at most a
// slot's bytes:
//
//   put the other ranks' slices of my input into my slot a    | barrier
//   reduce my slice from every rank's slot a into my slot b   | barrier
//   copy every rank's slot-b slice into my output
//
// an all-gather, per piece: my block's piece into my slot | barrier |
// every rank's piece into my output; the others alike (window_programs.h).
// One more barrier ends every call, so that every call starts at slot 0
// whatever the last one did. docs/performance.md §4.14 counts the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "algorithms/fingerprint.h"
#include "coil.h"
#include "device/staged_stream.h"

namespace coil::algo {

/// One rank's window, as mapped in this process: its two slots.
struct DeviceWindow {
  uint8_t* slot[2];
};

/// One call on device buffers, as the C API's (count: per rank's block for
/// the collectives with blocks).
struct DeviceCall {
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  coilDataType_t type;
  coilRedOp_t op;  // a built-in op: sum, prod, max, min or avg (where it reduces)
  int root = 0;    // broadcast, reduce, gather, scatter
};

/// Slices start on multiples of this many bytes, so that each rank's
/// kernels and copies start aligned.
constexpr size_t kDeviceSliceAlignBytes = 256;

/// Elements of a rank's block (of the buffer, for all-reduce) that one
/// piece of a `kind` call on n ranks carries through slots of `slotBytes`;
/// 0 where the slots are too small for the program (then it cannot run).
size_t deviceWindowPieceElems(CollKind kind, coilDataType_t type, size_t nranks,
                              size_t slotBytes);

/// The phases of one call of `kind` (any collective but the barrier) on
/// rank `rank` of windows.size(), whose slots hold `slotBytes` each;
/// `barrier` is a host barrier of all ranks (it throws to fail the call),
/// and the call's first host step is `firstBarrier` instead.
std::vector<device::StagedStream::Phase> deviceWindowPhases(
    CollKind kind, const DeviceCall& call, const std::vector<DeviceWindow>& windows,
    size_t slotBytes, int rank, std::function<void()> firstBarrier,
    std::function<void()> barrier);

}  // namespace coil::algo
