// The CUDA runtime as coil_perf uses it for --memory device: which devices
// there are, a stream per rank, and copies between a host mirror and a
// device buffer. The device buffers themselves come from coilMemAlloc.
//
// Two implementations, one chosen by meson: device_memory_cuda.cc (the CUDA
// runtime, in a build where coil found CUDA) and device_memory_absent.cc
// (no CUDA: every call that needs a device throws, saying so). Streams are
// opaque (a cudaStream_t) so that no other file includes CUDA's headers.
//
// CUDA is initialised by the first call that asks it anything. A process
// that forks ranks must not have done that (a child of a process that
// initialised CUDA cannot use it): the parent asks whyUnusableInChild().
// Every CUDA failure throws std::runtime_error naming the call, CUDA's
// error name and text, and its code.
#pragma once

#include <cstddef>
#include <string>

namespace coil_perf::gpu {

/// True in a build with the CUDA runtime.
bool builtWithCuda();

/// Asks CUDA how many devices there are (initialising it in this process):
/// "" and *count > 0 when one is usable, else why not (*count = 0).
std::string whyUnusable(int* count);

/// whyUnusable, asked in a forked child process, so that this one does not
/// initialise CUDA. Does not fork in a build without CUDA.
std::string whyUnusableInChild(int* count);

/// The number of devices (throws if CUDA fails or there is none).
int deviceCount();
/// Makes `device` the calling thread's current device.
void setDevice(int device);
/// The calling thread's current device.
int currentDevice();

using Stream = void*;  ///< a cudaStream_t

/// A stream on the current device that does not wait for the legacy default
/// stream (cudaStreamNonBlocking).
Stream createStream();
/// Destroys a stream from createStream; errors are ignored (nullptr too).
void destroyStream(Stream stream) noexcept;
/// Waits until the work queued on `stream` has run.
void syncStream(Stream stream);
/// Waits up to `seconds` for `stream`'s work, polling: true once it has run,
/// false if it is still busy then or CUDA reports an error. Never throws
/// (for cleanup after a failure, which must not hang).
bool waitStream(Stream stream, double seconds) noexcept;

/// Copies `bytes` from host memory to device memory in `stream`'s order,
/// and waits for the copy (and the work before it) to finish.
void copyToDevice(void* device, const void* host, size_t bytes, Stream stream);
/// Copies `bytes` from device memory to host memory in `stream`'s order,
/// and waits for the copy (and the work before it) to finish.
void copyToHost(void* host, const void* device, size_t bytes, Stream stream);

}  // namespace coil_perf::gpu
