// device_memory.h in a build without CUDA: there is no device memory.
#include <stdexcept>
#include <string>

#include "device_memory.h"

namespace coil_perf::gpu {
namespace {

const char kWhy[] = "coil_perf was built without CUDA (meson -Dcuda was disabled, or found no nvcc)";

[[noreturn]] void absent() { throw std::runtime_error(kWhy); }

}  // namespace

bool builtWithCuda() { return false; }

std::string whyUnusable(int* count) {
  *count = 0;
  return kWhy;
}

std::string whyUnusableInChild(int* count) { return whyUnusable(count); }

int deviceCount() { absent(); }
void setDevice(int) { absent(); }
int currentDevice() { absent(); }
Stream createStream() { absent(); }
void destroyStream(Stream) noexcept {}
void syncStream(Stream) { absent(); }
bool waitStream(Stream, double) noexcept { return true; }
void copyToDevice(void*, const void*, size_t, Stream) { absent(); }
void copyToHost(void*, const void*, size_t, Stream) { absent(); }

}  // namespace coil_perf::gpu
