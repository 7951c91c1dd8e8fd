// A GPU made of host threads, for testing StagedStream without one.
//
// It implements src/device/device.h: "device memory" is host memory from
// allocDevice (so kindOf can tell it apart), each stream runs its
// operations (copies, event records, waits on an event or on a word in
// memory, and test-only operations) in order on a hardware queue, a thread
// of its own or one it shares, and events complete when their stream
// reaches them. What it checks as it goes, as a real GPU would not:
// nothing is allocated or freed while a stream waits on a word (the
// implicit-synchronisation hazard, staged_stream.h), and copies touch only
// memory that exists.
//
// Device memory is a memfd segment (allocDevice's too, so that the
// application's buffers export as cudaMalloc's do: ipcRangeOf), and the two kernels of device_reduce.h that
// the peer all-reduce uses run coil's host kernels on the stream's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "device/device.h"

namespace coil::device::fake {

/// Queues `fn` on `stream`, run by the stream's thread in order with the rest.
void enqueueHostWork(Stream stream, std::function<void()> fn);
/// Allocations and frees made while some stream was waiting on a word.
int allocationsWhileWaiting();
/// Frees of memory this process exported for legacy IPC (allocIpc, or
/// allocDevice's blocks through ipcRangeOf) while another process still had
/// it open: undefined behaviour in CUDA (cudaIpcOpenMemHandle's docs).
int freesWhileOpenedElsewhere();
/// freeShared of a mapping opened from another process (openIpc) waits
/// `delay` first, in this process, from now on: a peer slow to close.
void delayCloses(std::chrono::milliseconds delay);
/// Resets the counters above.
void resetCounters();
/// Streams created from now on share `n` hardware queues, handed out in
/// turn, as a GPU's streams share its CUDA_DEVICE_MAX_CONNECTIONS queues:
/// an operation waits for everything pushed before it to its queue, from
/// any stream. 0 (the default): each stream has a queue of its own.
void shareHardwareQueues(int n);
/// sharedMemoryUnsupported() says `why` from now on (empty: supported), as
/// a driver without cuMem or POSIX handles would.
void refuseSharedMemory(const std::string& why);
/// allocIpc fails from now on, saying `why` (empty: it works), as a
/// driver refusing legacy IPC allocations would.
void refuseIpc(const std::string& why);
/// importShared fails from now on, saying `why` (empty: it works).
void failImports(const std::string& why);
/// openIpc fails from now on, saying `why` (empty: it works).
void failIpcOpens(const std::string& why);
/// A block of "device" memory (allocDevice), freed with its scope.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : p_(static_cast<uint8_t*>(allocDevice(bytes))) {}
  ~DeviceBuffer() { freeDevice(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uint8_t* get() const { return p_; }

 private:
  uint8_t* p_;
};
/// ipcRangeOf fails from now on, saying `why` (empty: it works), as CUDA
/// does for memory it cannot export (cuMem, a stream-ordered pool).
void refuseIpcRanges(const std::string& why);

}  // namespace coil::device::fake
