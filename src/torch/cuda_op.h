// CUDA tensors in the backend: ProcessGroupNCCL's stream pattern.
//
//   at the call (caller's thread)   record `inputsReady` on the current stream
//   when the work runs (worker)     the backend's side stream for the device
//                                   waits for inputsReady; with the side
//                                   stream current the body runs: ATen's
//                                   staging copies go on it, and coil
//                                   enqueues its calls on it (opStream())
//                                   and returns at once; then `done` is
//                                   recorded on it, and every tensor the
//                                   work touches is marked as used on it, so
//                                   the caching allocator does not hand its
//                                   memory out before the side stream has run
//   work.wait()                     the caller's current stream waits for
//                                   `done`; the host does not
//   the work's future               CUDA-aware, completed on the side stream:
//                                   its users' streams wait for it
//
// Only c10's device-generic interfaces are used (c10::Stream, c10::Event,
// the device guard), never CUDA's headers: the extension builds against any
// torch, and reaches CUDA through torch's own runtime. coil gets the raw
// cudaStream_t (Stream::native_handle) and moves the data through its
// device path (libcoil's staging over pinned memory).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "coil.h"

namespace coil_torch {

/// One side stream per device for one backend, taken from torch's pool on
/// first use. (Per backend: a collective of one group waiting on a side
/// stream must not hold back another group's, which the ranks may issue in
/// a different order.) Thread-safe.
class SideStreams {
 public:
  c10::Stream forDevice(const c10::Device& device);

 private:
  std::mutex mutex_;
  std::map<c10::DeviceIndex, c10::Stream> streams_;
};

class CudaOp {
 public:
  /// On the caller's thread, at the call: where its current stream is now.
  CudaOp(const c10::Device& device, c10::Stream side);

  /// At a later call that joins this op (a coalesced batch's next CUDA
  /// collective): where the current stream is now, which is later.
  void recordInputsReady();

  /// On the worker: runs `body` on the side stream as above and marks
  /// `tensors` (the work's inputs and outputs) as used there. `done` is
  /// recorded even when the body throws (and the exception passes on).
  void run(const std::function<void()>& body, const std::vector<at::Tensor>& tensors);
  /// Runs `fn` with the side stream current (completing the future).
  void onSideStream(const std::function<void()>& fn) const;
  /// Makes the calling thread's current stream wait for `done`.
  void blockCurrentStream();
  /// True once the GPU has run everything the work put on the side stream.
  bool finished() const;
  const c10::Device& device() const { return device_; }

 private:
  const c10::Device device_;
  const c10::Stream side_;
  c10::Event inputsReady_;
  c10::Event done_;
};

/// The stream the running body's coil calls go on: the side stream's
/// cudaStream_t inside CudaOp::run, else nullptr (host tensors).
coilStream_t opStream();

}  // namespace coil_torch
