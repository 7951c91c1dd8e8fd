// The CUDA runtime as coil uses it: which memory a pointer is, the device of
// a communicator, pinned staging memory, copies and events on streams, and
// making a stream wait for a word in host memory.
//
// Two implementations, one chosen by the build: cuda_device.cc (the CUDA
// runtime, linked statically, so libcoil.so loads on a machine without a
// driver) and device_absent.cc (a build without the toolkit). Callers never
// ask which: on a machine without a usable device (or a build without CUDA)
// available() is false, every pointer is host memory, and the functions that
// need a device throw coilInvalidUsage naming why none is usable.
//
// Streams and events are opaque `void*` here (cudaStream_t, cudaEvent_t) so
// that no caller includes CUDA's headers. Every CUDA failure becomes
// coil::Error(coilUnhandledCudaError) with CUDA's error name and text.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/owned_fd.h"

namespace coil::device {

enum class MemKind { kHost, kDevice };

/// True when this build has CUDA and the driver reports at least one device.
/// Decided once per process, at the first call (which initialises CUDA).
bool available();
/// Why available() is false ("built without CUDA", "no CUDA driver: ...");
/// empty when it is true.
std::string unavailableReason();
/// "CUDA runtime 13.0" or "built without CUDA": for logs and --version.
std::string buildDescription();

/// kDevice for memory the GPU owns (cudaMalloc, cuMem, managed memory);
/// kHost for anything else, pinned host memory included. Always kHost when
/// !available(), without touching CUDA.
MemKind kindOf(const void* ptr);

/// The calling thread's current device (cudaGetDevice).
int currentDevice();
/// Makes `device` current on the calling thread.
void setDevice(int device);
/// Number of devices (0 when !available()).
int deviceCount();
/// The GPU behind `device` (cudaDeviceProp::uuid): the same on every process
/// that sees this GPU, whatever its ordinal there (CUDA_VISIBLE_DEVICES).
using Uuid = std::array<uint8_t, 16>;
Uuid uuidOf(int device);

/// cudaMalloc / cudaFree on the current device.
void* allocDevice(size_t bytes);
void freeDevice(void* ptr) noexcept;
/// Page-locked host memory, mapped into every device's address space (so
/// a stream can wait on a word of it and copies from it run asynchronously).
void* allocPinned(size_t bytes);
void freePinned(void* ptr) noexcept;

using Stream = void*;
using Event = void*;

/// A stream of coil's own (non-blocking: it never waits for the legacy
/// default stream).
Stream createStream();
void destroyStream(Stream stream) noexcept;
/// cudaMemcpyAsync in the direction the pointers say (cudaMemcpyDefault).
void copyAsync(void* dst, const void* src, size_t bytes, Stream stream);
Event createEvent();  // timing disabled: the cheap kind
void destroyEvent(Event event) noexcept;
void recordEvent(Event event, Stream stream);
/// Makes `stream` wait, on the GPU, for the work before the event's latest
/// record (cudaStreamWaitEvent): a dependency CUDA sees, unlike waitWord.
void waitEvent(Stream stream, Event event);
/// Blocks the calling thread until the work before the event has run.
void syncEvent(Event event);
void syncStream(Stream stream);
/// Enqueues on `stream` a wait until the 32-bit word at `word` (in memory
/// from allocPinned) reaches `ticket`, compared cyclically (wrap-safe):
/// the GPU's front end waits, no kernel spins. The host releases the
/// stream by storing a value >= ticket into the word.
void waitWord(Stream stream, const volatile uint32_t* word, uint32_t ticket);

/// Device memory that other processes of this host map (CUDA IPC), in one
/// of two ways:
///   - cuMem (preferred): an allocation made exportable as a POSIX file
///     descriptor, which a peer receives over a Unix socket
///     (net/fd_passing.h) and maps into its own address space;
///   - legacy IPC (cudaIpc*): an ordinary allocation whose 64-byte handle a
///     peer opens. Needs neither cuMem's POSIX handles (which some drivers
///     and virtualized GPUs lack) nor descriptor passing; a process cannot
///     open its own handles.
/// The same struct describes this rank's allocation and a peer's mapping.
struct SharedMemory {
  enum class Kind : uint8_t {
    kNone,
    kCuMem,       // allocShared or importShared
    kIpcOwn,      // allocIpc
    kIpcOpened,   // openIpc
    kBorrowed,    // a pointer of this process (a peer that is a thread here): not freed
  };
  void* ptr = nullptr;  // device address in this process
  size_t bytes = 0;     // mapped bytes (a multiple of the allocation granularity)
  uint64_t handle = 0;  // the implementation's allocation handle
  Kind kind = Kind::kNone;
};
/// Why allocShared cannot work on the current device (the driver lacks
/// cuMem, or POSIX file descriptor handles); empty when it can.
std::string sharedMemoryUnsupported();
/// At least `bytes` of device memory on the current device, exportable.
SharedMemory allocShared(size_t bytes);
/// A new descriptor for `memory` (from allocShared), to pass to a peer.
OwnedFd exportShared(const SharedMemory& memory);
/// Maps a peer's exported allocation (`bytes` as the peer's SharedMemory
/// says) for the current device; the descriptor stays the caller's.
SharedMemory importShared(int fd, size_t bytes);

/// A legacy IPC handle (cudaIpcMemHandle_t's 64 bytes).
struct IpcHandle {
  std::array<uint8_t, 64> bytes{};
};
/// `bytes` of device memory on the current device, for legacy IPC.
SharedMemory allocIpc(size_t bytes);
/// The handle a peer process passes to openIpc for `memory` (from allocIpc).
IpcHandle ipcHandleOf(const SharedMemory& memory);
/// Maps another process's allocation (`bytes` as its SharedMemory says)
/// for the current device.
SharedMemory openIpc(const IpcHandle& handle, size_t bytes);

/// The legacy IPC handle of the allocation that holds [ptr, ptr + bytes)
/// (memory from cudaMalloc: the handle of its base, which the whole
/// allocation shares), and where the range starts in it: a peer maps the
/// allocation with openIpc(handle, allocationBytes) and adds `offset`.
/// For the application's own buffers (coilCommWindowRegister). Throws
/// coilUnhandledCudaError where CUDA cannot export it (memory from cuMem or
/// a stream-ordered pool), coilInvalidArgument where the range runs past
/// its allocation.
struct IpcRange {
  IpcHandle handle;
  uint64_t offset = 0;           // of ptr from the allocation's start
  uint64_t allocationBytes = 0;  // the whole allocation's
};
IpcRange ipcRangeOf(const void* ptr, size_t bytes);

/// Unmaps and releases any of the above, own or a peer's (the memory itself
/// goes when its last mapping does). Null or borrowed memory is only reset.
void freeShared(SharedMemory& memory) noexcept;

}  // namespace coil::device
