// The all-reduce of device buffers between ranks that map each other's
// device memory: processes of one host through CUDA IPC, or threads of one
// process. Every rank owns a window of two slots that every rank can read
// (api/peer_windows.h makes and maps them).
//
// It is the shm window's slice all-reduce (window_programs.h), the same
// program, run by a third executor beside WindowExecutor and WindowTrace:
// DeviceWindowExecutor turns each of the program's steps into GPU work on
// the caller's stream (put and copyOut are device copies, reduceToSlot is
// one chain kernel over the n terms in mapped peer memory, in rank order,
// so the bits are the host engine's: device::reduceChainAsync) and each
// wait into a host step: a barrier of the communicator's host engine, run
// by device::StagedStream between the stream's phases. No kernel waits for
// another rank's kernel, which on one GPU shared by processes without MPS
// would be a deadlock (the GPU runs one context at a time). Per piece of at most a slot's bytes:
//
//   put the other ranks' slices of my input into my slot a    | barrier
//   reduce my slice from every rank's slot a into my slot b   | barrier
//   copy every rank's slot-b slice into my output
//
// and one more barrier ends the call, so that every call starts at slot 0
// whatever the last one did. docs/performance.md §4.14 counts the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "coil.h"
#include "device/staged_stream.h"

namespace coil::algo {

/// One rank's window, as mapped in this process: its two slots.
struct DeviceWindow {
  uint8_t* slot[2];
};

struct DeviceAllReduceCall {
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  coilDataType_t type;
  coilRedOp_t op;  // a built-in op: sum, prod, max, min or avg
};

/// Slices start on multiples of this many bytes, so that each rank's
/// kernels and copies start aligned.
constexpr size_t kDeviceSliceAlignBytes = 256;

/// The phases of one all-reduce on rank `rank` of windows.size(), whose
/// slots hold `slotBytes` each; `barrier` is a host barrier of all ranks
/// (it throws to fail the call).
std::vector<device::StagedStream::Phase> deviceWindowAllReducePhases(
    const DeviceAllReduceCall& call, const std::vector<DeviceWindow>& windows, size_t slotBytes,
    int rank, std::function<void()> barrier);

}  // namespace coil::algo
