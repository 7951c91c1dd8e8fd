// device.h over the CUDA runtime (linked statically: it loads the driver,
// libcuda.so.1, only when first used, so a libcoil.so built with CUDA runs
// host collectives on a machine that has no driver).
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

#include "core/error.h"
#include "device/cuda_diagnosis.h"
#include "device/device.h"

namespace coil::device {
namespace {

[[noreturn]] void failCuda(const char* what, cudaError_t err) {
  fail(coilUnhandledCudaError, what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

void check(const char* what, cudaError_t err) {
  if (err != cudaSuccess) failCuda(what, err);
}

using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct Probe {
  bool usable = false;
  std::string reason;
  WaitValue32 waitValue32 = nullptr;
};

// Once per process: is there a driver and a device, and the driver's
// stream-wait entry point (the runtime has no wrapper for it).
const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      p.reason = "no usable CUDA device: " + describeCudaUnusable(err, count);
      cudaGetLastError();  // not sticky: clear it for the application
      return p;
    }
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 11070, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || fn == nullptr) {
      p.reason = "the CUDA driver has no cuStreamWaitValue32";
      return p;
    }
    p.waitValue32 = reinterpret_cast<WaitValue32>(fn);
    p.usable = true;
    return p;
  }();
  return result;
}

void requireDevice(const char* what) {
  if (!probe().usable) fail(coilInvalidUsage, what, ": ", probe().reason);
}

}  // namespace

bool available() { return probe().usable; }

std::string unavailableReason() { return probe().usable ? std::string() : probe().reason; }

std::string buildDescription() {
  return "CUDA runtime " + cudaVersionText(CUDART_VERSION);
}

MemKind kindOf(const void* ptr) {
  if (ptr == nullptr || !available()) return MemKind::kHost;
  cudaPointerAttributes attributes{};
  const cudaError_t err = cudaPointerGetAttributes(&attributes, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();  // an unknown pointer is host memory, not an error
    return MemKind::kHost;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged
             ? MemKind::kDevice
             : MemKind::kHost;
}

int currentDevice() {
  requireDevice("currentDevice");
  int device = 0;
  check("cudaGetDevice", cudaGetDevice(&device));
  return device;
}

void setDevice(int device) {
  requireDevice("setDevice");
  check("cudaSetDevice", cudaSetDevice(device));
}

int deviceCount() {
  if (!available()) return 0;
  int count = 0;
  check("cudaGetDeviceCount", cudaGetDeviceCount(&count));
  return count;
}

Uuid uuidOf(int device) {
  requireDevice("uuidOf");
  cudaDeviceProp properties{};
  check("cudaGetDeviceProperties", cudaGetDeviceProperties(&properties, device));
  Uuid uuid{};
  static_assert(sizeof properties.uuid.bytes == sizeof uuid);
  std::memcpy(uuid.data(), properties.uuid.bytes, uuid.size());
  return uuid;
}

void* allocDevice(size_t bytes) {
  requireDevice("allocDevice");
  void* p = nullptr;
  check("cudaMalloc", cudaMalloc(&p, bytes));
  return p;
}

void freeDevice(void* ptr) noexcept {
  if (ptr) cudaFree(ptr);
}

void* allocPinned(size_t bytes) {
  requireDevice("allocPinned");
  void* p = nullptr;
  check("cudaHostAlloc", cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  return p;
}

void freePinned(void* ptr) noexcept {
  if (ptr) cudaFreeHost(ptr);
}

Stream createStream() {
  requireDevice("createStream");
  cudaStream_t stream = nullptr;
  check("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

void destroyStream(Stream stream) noexcept {
  if (stream) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

void copyAsync(void* dst, const void* src, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  check("cudaMemcpyAsync",
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
}

Event createEvent() {
  cudaEvent_t event = nullptr;
  check("cudaEventCreateWithFlags", cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void destroyEvent(Event event) noexcept {
  if (event) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

void recordEvent(Event event, Stream stream) {
  check("cudaEventRecord",
        cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}

void waitEvent(Stream stream, Event event) {
  check("cudaStreamWaitEvent", cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                                   static_cast<cudaEvent_t>(event), 0));
}

void syncEvent(Event event) {
  check("cudaEventSynchronize", cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

void syncStream(Stream stream) {
  check("cudaStreamSynchronize", cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

void waitWord(Stream stream, const volatile uint32_t* word, uint32_t ticket) {
  requireDevice("waitWord");
  void* devicePtr = nullptr;
  check("cudaHostGetDevicePointer",
        cudaHostGetDevicePointer(&devicePtr, const_cast<uint32_t*>(word), 0));
  const CUresult r = probe().waitValue32(static_cast<CUstream>(stream),
                                         reinterpret_cast<CUdeviceptr>(devicePtr), ticket,
                                         CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS)
    fail(coilUnhandledCudaError, "cuStreamWaitValue32: CUresult ", static_cast<int>(r),
         r == CUDA_ERROR_NOT_SUPPORTED ? " (stream memory operations are not supported here)" : "");
}

}  // namespace coil::device
