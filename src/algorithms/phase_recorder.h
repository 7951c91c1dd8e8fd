// What both device executors of window programs share (the peer windows'
// DeviceWindowExecutor, device_window_collectives.cc, and the registered
// windows' DeviceDirectExecutor, registered_collectives.cc): GPU work gathers
// until the program waits, and the wait closes a StagedStream phase whose
// host step (a barrier of the ranks) runs once the stream has done it.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "device/device.h"
#include "device/device_reduce.h"
#include "device/staged_stream.h"
#include "reduce/reduce.h"

namespace coil::algo {

class PhaseRecorder {
 public:
  using GpuWork = std::function<void(device::Stream)>;
  using Phase = device::StagedStream::Phase;

  /// Queues work for the current phase's GPU part.
  void gpu(GpuWork work) { pending_.push_back(std::move(work)); }
  /// Ends the current phase with `hostStep` (no GPU part if nothing was queued).
  void closePhase(std::function<void()> hostStep) {
    std::function<void(device::Stream)> onStream;
    if (!pending_.empty())
      onStream = [work = std::move(pending_)](device::Stream s) {
        for (const GpuWork& w : work) w(s);
      };
    pending_.clear();
    phases_.push_back({std::move(onStream), std::move(hostStep)});
  }
  /// Queues dst = fin(x0 ⊕ x1 ⊕ … ⊕ x(n-1)) over `count` elements: one chain
  /// kernel over the terms in rank order, as every executor of a window
  /// program reduces (device_reduce.h: not n - 1 pairwise kernels that write
  /// and re-read the partial sums), then coilAvg's division; one term is a
  /// copy.
  void reduceTerms(void* dst, std::vector<const void*> terms, size_t count, coilDataType_t type,
                   coilRedOp_t op) {
    gpu([=, terms = std::move(terms)](device::Stream s) {
      const int n = static_cast<int>(terms.size());
      if (n == 1) device::copyAsync(dst, terms[0], count * reduce::typeSize(type), s);
      else device::reduceChainAsync(dst, terms.data(), n, count, type, op, s);
      if (op == coilAvg) device::divideAsync(dst, dst, count, type, n, s);
    });
  }
  size_t phasesClosed() const { return phases_.size(); }
  std::vector<Phase> take() { return std::move(phases_); }

 private:
  std::vector<GpuWork> pending_;
  std::vector<Phase> phases_;
};

}  // namespace coil::algo
