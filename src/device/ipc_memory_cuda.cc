// device.h's legacy IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle) and
// freeShared for every kind of SharedMemory.
//
// The fallback of the peer windows when cuMem's descriptors cannot be used
// (api/peer_windows.cc): an allocation from cudaMalloc has a 64-byte handle
// that travels like any other bytes (the communicator's all-gather), so it
// needs neither POSIX handle support nor a Unix socket shared with the peer.
#include <cuda.h>
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

namespace {

using AddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// The driver's cuMemGetAddressRange (the runtime has no call that finds an
// allocation's base), looked up once as shared_memory_cuda.cc's are.
AddressRange addressRange() {
  static const AddressRange fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return AddressRange{};
    }
    return reinterpret_cast<AddressRange>(p);
  }();
  return fn;
}

}  // namespace

IpcRange ipcRangeOf(const void* ptr, size_t bytes) {
  const AddressRange range = addressRange();
  if (range == nullptr) fail(coilUnhandledCudaError, "the CUDA driver has no cuMemGetAddressRange");
  CUdeviceptr base = 0;
  size_t size = 0;
  const CUresult r = range(&base, &size, reinterpret_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS)
    fail(coilUnhandledCudaError, "cuMemGetAddressRange(", ptr, "): CUresult ", static_cast<int>(r));
  IpcRange out;
  out.offset = reinterpret_cast<uintptr_t>(ptr) - base;
  out.allocationBytes = size;
  if (out.offset + bytes > size)
    fail(coilInvalidArgument, "[", ptr, ", +", bytes, " bytes) runs past the end of its CUDA ",
         "allocation (", size, " bytes from ", reinterpret_cast<void*>(base), ")");
  cudaIpcMemHandle_t h{};
  const cudaError_t err = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base));
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky: the application's next call must not see it
    fail(coilUnhandledCudaError, "cudaIpcGetMemHandle: ", cudaGetErrorName(err), ": ",
         cudaGetErrorString(err), " (legacy IPC exports memory from cudaMalloc only)");
  }
  std::memcpy(out.handle.bytes.data(), &h, sizeof h);
  return out;
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
