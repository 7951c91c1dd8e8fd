// device.h's SharedMemory over CUDA's virtual memory management (cuMem*):
// physical memory made with a POSIX file descriptor handle type, mapped at
// an address range reserved for it, read-write for the current device.
//
// These are driver API calls, and coil links only the static runtime, so
// each is looked up once through cudaGetDriverEntryPointByVersion (as
// cuStreamWaitValue32 is in cuda_device.cc): libcoil.so still loads, and
// runs host collectives, where there is no driver.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "device/device.h"

namespace coil::device {
namespace {

struct MemoryApi {
  std::string missing;  // the first entry point the driver lacks; empty: all there
  decltype(&cuGetErrorName) errorName = nullptr;
  decltype(&cuDeviceGet) deviceGet = nullptr;
  decltype(&cuDeviceGetAttribute) attribute = nullptr;
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemExportToShareableHandle) exportHandle = nullptr;
  decltype(&cuMemImportFromShareableHandle) importHandle = nullptr;
  decltype(&cuMemAddressReserve) reserve = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemSetAccess) setAccess = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemAddressFree) addressFree = nullptr;
  decltype(&cuMemRelease) release = nullptr;
};

template <typename Fn>
void lookUp(MemoryApi& api, const char* name, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    if (api.missing.empty()) api.missing = std::string("the CUDA driver has no ") + name;
    return;
  }
  *fn = reinterpret_cast<Fn>(p);
}

const MemoryApi& memoryApi() {
  static const MemoryApi api = [] {
    MemoryApi a;
    if (!available()) {
      a.missing = unavailableReason();
      return a;
    }
    lookUp(a, "cuGetErrorName", &a.errorName);
    lookUp(a, "cuDeviceGet", &a.deviceGet);
    lookUp(a, "cuDeviceGetAttribute", &a.attribute);
    lookUp(a, "cuMemGetAllocationGranularity", &a.granularity);
    lookUp(a, "cuMemCreate", &a.create);
    lookUp(a, "cuMemExportToShareableHandle", &a.exportHandle);
    lookUp(a, "cuMemImportFromShareableHandle", &a.importHandle);
    lookUp(a, "cuMemAddressReserve", &a.reserve);
    lookUp(a, "cuMemMap", &a.map);
    lookUp(a, "cuMemSetAccess", &a.setAccess);
    lookUp(a, "cuMemUnmap", &a.unmap);
    lookUp(a, "cuMemAddressFree", &a.addressFree);
    lookUp(a, "cuMemRelease", &a.release);
    return a;
  }();
  return api;
}

const MemoryApi& requireApi(const char* what) {
  const MemoryApi& api = memoryApi();
  if (!api.missing.empty()) fail(coilInvalidUsage, what, ": ", api.missing);
  return api;
}

void check(const MemoryApi& api, const char* what, CUresult r) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (api.errorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown CUresult";
  fail(coilUnhandledCudaError, what, ": ", name, " (", static_cast<int>(r), ")");
}

CUmemLocation currentLocation() {
  CUmemLocation where{};
  where.type = CU_MEM_LOCATION_TYPE_DEVICE;
  where.id = currentDevice();
  return where;
}

// Reserves an address range for `handle`, maps it and lets the current
// device read and write it. Undoes what it did if a step fails.
void* mapHere(const MemoryApi& api, CUmemGenericAllocationHandle handle, size_t bytes,
              size_t alignment) {
  CUdeviceptr address = 0;
  check(api, "cuMemAddressReserve", api.reserve(&address, bytes, alignment, 0, 0));
  const char* step = "cuMemMap";
  CUresult r = api.map(address, bytes, 0, handle, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access{};
    access.location = currentLocation();
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    step = "cuMemSetAccess";
    r = api.setAccess(address, bytes, &access, 1);
    if (r != CUDA_SUCCESS) api.unmap(address, bytes);
  }
  if (r != CUDA_SUCCESS) {
    api.addressFree(address, bytes);
    check(api, step, r);
  }
  return reinterpret_cast<void*>(address);
}

}  // namespace

std::string sharedMemoryUnsupported() {
  const MemoryApi& api = memoryApi();
  if (!api.missing.empty()) return api.missing;
  CUdevice dev = 0;
  int vmm = 0, fds = 0;
  if (api.deviceGet(&dev, currentDevice()) != CUDA_SUCCESS ||
      api.attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) !=
          CUDA_SUCCESS ||
      api.attribute(&fds, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev) !=
          CUDA_SUCCESS)
    return "the CUDA driver could not say whether the device supports cuMem";
  if (!vmm) return "the device does not support CUDA virtual memory management (cuMem)";
  if (!fds) return "the device cannot export memory as POSIX file descriptors";
  return {};
}

SharedMemory allocShared(size_t bytes) {
  const MemoryApi& api = requireApi("allocShared");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = currentLocation();
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t granularity = 0;
  check(api, "cuMemGetAllocationGranularity",
        api.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  const size_t size = (std::max<size_t>(bytes, 1) + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  check(api, "cuMemCreate", api.create(&handle, size, &prop, 0));
  try {
    void* ptr = mapHere(api, handle, size, granularity);
    return {ptr, size, static_cast<uint64_t>(handle), SharedMemory::Kind::kCuMem};
  } catch (...) {
    api.release(handle);
    throw;
  }
}

OwnedFd exportShared(const SharedMemory& memory) {
  const MemoryApi& api = requireApi("exportShared");
  int fd = -1;
  check(api, "cuMemExportToShareableHandle",
        api.exportHandle(&fd, static_cast<CUmemGenericAllocationHandle>(memory.handle),
                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  return OwnedFd(fd);
}

SharedMemory importShared(int fd, size_t bytes) {
  const MemoryApi& api = requireApi("importShared");
  CUmemGenericAllocationHandle handle = 0;
  check(api, "cuMemImportFromShareableHandle",
        api.importHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  try {
    // The exporter's size is a multiple of its granularity, hence of ours
    // (one device model, one granularity); alignment 0 lets CUDA choose.
    void* ptr = mapHere(api, handle, bytes, 0);
    return {ptr, bytes, static_cast<uint64_t>(handle), SharedMemory::Kind::kCuMem};
  } catch (...) {
    api.release(handle);
    throw;
  }
}

void freeCuMem(SharedMemory& memory) noexcept {
  const MemoryApi& api = memoryApi();
  if (!api.missing.empty()) return;
  const auto address = reinterpret_cast<CUdeviceptr>(memory.ptr);
  api.unmap(address, memory.bytes);
  api.addressFree(address, memory.bytes);
  api.release(static_cast<CUmemGenericAllocationHandle>(memory.handle));
}

}  // namespace coil::device
