// device.h's legacy IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle) and
// freeShared for every kind of SharedMemory.
//
// The fallback of the peer windows when cuMem's descriptors cannot be used
// (api/peer_windows.cc): an allocation from cudaMalloc has a 64-byte handle
// that travels like any other bytes (the communicator's all-gather), so it
// needs neither POSIX handle support nor a Unix socket shared with the peer.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "device/device.h"

namespace coil::device {

void freeCuMem(SharedMemory& memory) noexcept;  // shared_memory_cuda.cc

namespace {

void check(const char* what, cudaError_t err) {
  if (err != cudaSuccess)
    fail(coilUnhandledCudaError, what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

}  // namespace

SharedMemory allocIpc(size_t bytes) {
  void* ptr = nullptr;
  const size_t size = std::max<size_t>(bytes, 1);
  check("cudaMalloc (legacy IPC)", cudaMalloc(&ptr, size));
  return {ptr, size, 0, SharedMemory::Kind::kIpcOwn};
}

IpcHandle ipcHandleOf(const SharedMemory& memory) {
  if (memory.kind != SharedMemory::Kind::kIpcOwn)
    fail(coilInternalError, "ipcHandleOf: not an allocation from allocIpc");
  cudaIpcMemHandle_t h{};
  check("cudaIpcGetMemHandle", cudaIpcGetMemHandle(&h, memory.ptr));
  static_assert(sizeof h == sizeof(IpcHandle::bytes));
  IpcHandle out;
  std::memcpy(out.bytes.data(), &h, sizeof h);
  return out;
}

SharedMemory openIpc(const IpcHandle& handle, size_t bytes) {
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle.bytes.data(), sizeof h);
  void* ptr = nullptr;
  // Lazy peer access: a peer on another GPU of this host is mapped with
  // peer access enabled, as the cuMem path's cuMemSetAccess does.
  check("cudaIpcOpenMemHandle", cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess));
  return {ptr, bytes, 0, SharedMemory::Kind::kIpcOpened};
}

void freeShared(SharedMemory& memory) noexcept {
  switch (memory.kind) {
    case SharedMemory::Kind::kCuMem: freeCuMem(memory); break;
    case SharedMemory::Kind::kIpcOwn: cudaFree(memory.ptr); break;
    case SharedMemory::Kind::kIpcOpened: cudaIpcCloseMemHandle(memory.ptr); break;
    case SharedMemory::Kind::kNone:
    case SharedMemory::Kind::kBorrowed: break;
  }
  memory = SharedMemory{};
}

}  // namespace coil::device
