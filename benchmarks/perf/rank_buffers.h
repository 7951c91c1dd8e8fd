// The send and receive buffers of one rank's sweep, in host memory or
// (--memory device) in device memory from coilMemAlloc, with the rank's
// own CUDA stream and host mirrors.
//
// The checker (expect.h) fills, poisons and checks host memory, so with
// device buffers it works on the mirrors: hostOf() maps a pointer into a
// device buffer (in-place calls point inside one) to the same offset of its
// mirror, upload() copies the mirrors to the device before a call and
// download() copies the results back after it. With host buffers the
// mirrors are the buffers themselves and upload/download do nothing.
#pragma once

#include <cstddef>

#include "coil.h"

namespace coil_perf {

class RankBuffers {
 public:
  /// Two buffers of `bytes` each: host pages, or (`device`) coilMemAlloc'd
  /// on the calling thread's current CUDA device, with a new non-blocking
  /// stream on it. Throws std::runtime_error (CoilFailure for coilMemAlloc)
  /// on failure.
  RankBuffers(bool device, size_t bytes);
  /// Device: waits (bounded) for the stream, then frees the buffers and the
  /// stream; if the stream is still busy it leaves them allocated, saying so.
  ~RankBuffers();
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;

  bool device() const { return device_; }
  size_t bytes() const { return bytes_; }
  /// The buffers coil's calls get.
  void* send() const { return send_; }
  void* recv() const { return recv_; }
  /// The stream coil's calls get: the rank's own with device buffers, NULL
  /// with host buffers.
  coilStream_t stream() const { return stream_; }

  /// The host memory standing for `p`, a pointer into send() or recv() (or
  /// one past their end): `p` itself with host buffers, the same offset of
  /// the mirror with device buffers. Throws std::logic_error for any other
  /// pointer with device buffers.
  void* hostOf(const void* p) const;

  /// Device: copies the first `bytes` (capped at bytes()) of both mirrors to
  /// the device buffers and waits for the copies.
  void upload(size_t bytes);
  /// Device: waits for the stream, then copies the first `bytes` of both
  /// device buffers to the mirrors.
  void download(size_t bytes);
  /// Device: waits until the work queued on the stream has run.
  void sync();

 private:
  bool device_;
  size_t bytes_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  void* sendHost_ = nullptr;  // device only: the mirrors
  void* recvHost_ = nullptr;
  coilStream_t stream_ = nullptr;
};

}  // namespace coil_perf
