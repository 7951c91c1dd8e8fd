// device_memory.h with the CUDA runtime (builds where coil found CUDA).
#include <cuda_runtime_api.h>
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "device/cuda_diagnosis.h"
#include "device_memory.h"

namespace coil_perf::gpu {
namespace {

std::string describe(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err) + " (code " +
         std::to_string(static_cast<int>(err)) + ")";
}

void check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + describe(err));
}

cudaStream_t asStream(Stream s) { return static_cast<cudaStream_t>(s); }

}  // namespace

bool builtWithCuda() { return true; }

std::string whyUnusable(int* count) {
  *count = 0;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n <= 0) return coil::device::describeCudaUnusable(err, n);
  *count = n;
  return "";
}

std::string whyUnusableInChild(int* count) {
  *count = 0;
  int fds[2];
  if (pipe(fds) != 0) return std::string("pipe: ") + std::strerror(errno);
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(fds[0]);
    close(fds[1]);
    return std::string("fork: ") + std::strerror(e);
  }
  if (pid == 0) {
    close(fds[0]);
    int n = 0;
    const std::string why = whyUnusable(&n);
    // The count first (4 bytes), then the reason.
    const int32_t n32 = n;
    std::string message(reinterpret_cast<const char*>(&n32), sizeof(n32));
    message += why;
    size_t done = 0;
    while (done < message.size()) {
      const ssize_t k = write(fds[1], message.data() + done, message.size() - done);
      if (k <= 0) _exit(2);
      done += static_cast<size_t>(k);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string message;
  char buf[512];
  for (;;) {
    const ssize_t k = read(fds[0], buf, sizeof(buf));
    if (k > 0) {
      message.append(buf, static_cast<size_t>(k));
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || message.size() < sizeof(int32_t)) {
    return "the process that asked CUDA for its devices failed" +
           (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")"
                                : std::string());
  }
  int32_t n32 = 0;
  std::memcpy(&n32, message.data(), sizeof(n32));
  const std::string why = message.substr(sizeof(n32));
  *count = why.empty() ? n32 : 0;
  return why;
}

int deviceCount() {
  int n = 0;
  const std::string why = whyUnusable(&n);
  if (!why.empty()) throw std::runtime_error("no usable CUDA device (" + why + ")");
  return n;
}

void setDevice(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }

int currentDevice() {
  int device = -1;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

Stream createStream() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}

void destroyStream(Stream stream) noexcept {
  if (stream != nullptr) (void)cudaStreamDestroy(asStream(stream));
}

void syncStream(Stream stream) {
  check(cudaStreamSynchronize(asStream(stream)), "cudaStreamSynchronize");
}

bool waitStream(Stream stream, double seconds) noexcept {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const cudaError_t err = cudaStreamQuery(asStream(stream));
    if (err == cudaSuccess) return true;
    if (err != cudaErrorNotReady) return false;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void copyToDevice(void* device, const void* host, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, asStream(stream)),
        "cudaMemcpyAsync(host to device)");
  syncStream(stream);
}

void copyToHost(void* host, const void* device, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, asStream(stream)),
        "cudaMemcpyAsync(device to host)");
  syncStream(stream);
}

}  // namespace coil_perf::gpu
