// Why the CUDA runtime cannot be used here, in words a user can act on.
//
// cudaGetDeviceCount() answers cudaErrorInsufficientDriver ("CUDA driver
// version is insufficient for CUDA runtime version") both when the driver is
// older than the runtime and when there is no NVIDIA driver at all, as on a
// CPU-only machine. The first calls for a driver update, the second for a
// GPU; the raw string suggests the update for both. Header-only: the
// library, the gpu tests and the benchmarks each link the runtime
// themselves.
#pragma once

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <string>

namespace coil::device {

/// "13.0" from a CUDA version number (1000 * major + 10 * minor).
inline std::string cudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

/// The reason for `err`, the result of cudaGetDeviceCount() (`deviceCount`
/// its count); empty when a device is there.
inline std::string describeCudaUnusable(cudaError_t err, int deviceCount) {
  if (err == cudaSuccess) return deviceCount > 0 ? std::string() : "the NVIDIA driver sees no GPU";
  const std::string said = std::string("; cudaGetDeviceCount said ") + cudaGetErrorName(err);
  if (err == cudaErrorInsufficientDriver) {
    // The name the runtime loads; dlopen finds it where the runtime would.
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == nullptr) {
      return "no NVIDIA driver on this machine: libcuda.so.1 is not installed" + said;
    }
    dlclose(driver);
    int driverVersion = 0;
    cudaDriverGetVersion(&driverVersion);
    return "the NVIDIA driver supports CUDA " + cudaVersionText(driverVersion) +
           ", older than the CUDA runtime " + cudaVersionText(CUDART_VERSION) +
           " this program was built with: update the driver" + said;
  }
  if (err == cudaErrorNoDevice) return "the NVIDIA driver sees no GPU" + said;
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

}  // namespace coil::device
