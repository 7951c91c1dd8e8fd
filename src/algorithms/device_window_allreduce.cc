#include "algorithms/device_window_allreduce.h"

#include <algorithm>
#include <utility>

#include "algorithms/phase_recorder.h"
#include "algorithms/window_programs.h"
#include "core/error.h"
#include "device/device_reduce.h"
#include "reduce/reduce.h"

namespace coil::algo {
namespace {

using device::Stream;
using Phase = PhaseRecorder::Phase;

// The vocabulary of window_programs.h over mapped device memory, recorded
// as StagedStream phases: GPU work gathers until a wait, which closes a
// phase with the host barrier. Offsets and counts are in elements.
class DeviceWindowExecutor {
 public:
  DeviceWindowExecutor(const DeviceAllReduceCall& call, const std::vector<DeviceWindow>& windows,
                       int rank, std::function<void()> barrier)
      : call_(call),
        windows_(windows),
        rank_(rank),
        nranks_(static_cast<int>(windows.size())),
        esize_(reduce::typeSize(call.type)),
        barrier_(std::move(barrier)) {}

  uint32_t nextStep() const { return posted_ + 1; }

  void put(int slot, size_t in, size_t at, size_t n, bool /*inlined: never, on a device*/) {
    uint8_t* dst = slotOf(rank_, slot) + at * esize_;
    const uint8_t* src = input() + in * esize_;
    const size_t bytes = n * esize_;
    gpu([=](Stream s) { device::copyAsync(dst, src, bytes, s); });
  }

  void post(uint32_t step, int /*slot*/) { posted_ = step; }

  void wait(uint32_t /*step*/, size_t /*inlineElems*/) { closePhase(barrier_); }

  void reduceToSlot(int from, size_t at, int to, size_t n, size_t in) {
    uint8_t* dst = slotOf(rank_, to) + at * esize_;
    std::vector<const void*> terms;
    for (int q = 0; q < nranks_; ++q)
      terms.push_back(q == rank_ ? input() + in * esize_ : slotOf(q, from) + at * esize_);
    phases_.reduceTerms(dst, std::move(terms), n, call_.type, call_.op);
  }

  void copyOut(int owner, int slot, size_t at, size_t out, size_t n) {
    uint8_t* dst = static_cast<uint8_t*>(call_.recvbuff) + out * esize_;
    const uint8_t* src = slotOf(owner, slot) + at * esize_;
    const size_t bytes = n * esize_;
    gpu([=](Stream s) { device::copyAsync(dst, src, bytes, s); });
  }

  void joined() {}

  // The last barrier: no rank reads another's slots after it, so the next
  // call may start at slot 0 (and a call that failed half-way cannot leave
  // the ranks at different slots).
  void done() { closePhase(barrier_); }

  std::vector<Phase> takePhases() { return phases_.take(); }

 private:
  const uint8_t* input() const { return static_cast<const uint8_t*>(call_.sendbuff); }
  uint8_t* slotOf(int rank, int slot) const {
    return windows_[static_cast<size_t>(rank)].slot[slot];
  }
  void gpu(PhaseRecorder::GpuWork work) { phases_.gpu(std::move(work)); }
  void closePhase(std::function<void()> hostStep) { phases_.closePhase(std::move(hostStep)); }

  const DeviceAllReduceCall call_;
  const std::vector<DeviceWindow>& windows_;
  const int rank_, nranks_;
  const size_t esize_;
  const std::function<void()> barrier_;
  uint32_t posted_ = 0;  // every call starts at step 1: slot 1, then slot 0
  PhaseRecorder phases_;
};

}  // namespace

std::vector<Phase> deviceWindowAllReducePhases(const DeviceAllReduceCall& call,
                                               const std::vector<DeviceWindow>& windows,
                                               size_t slotBytes, int rank,
                                               std::function<void()> barrier) {
  const size_t esize = reduce::typeSize(call.type);
  const size_t lineElems = std::max<size_t>(1, kDeviceSliceAlignBytes / esize);
  // Whole aligned slices for every rank in a piece: a multiple of n lines.
  const size_t n = windows.size();
  const size_t pieceElems = slotBytes / esize / (n * lineElems) * (n * lineElems);
  if (pieceElems == 0)
    fail(coilInternalError, "device window all-reduce: a slot of ", slotBytes,
         " bytes is too small for ", n, " ranks' slices of ", reduce::typeName(call.type));
  DeviceWindowExecutor executor(call, windows, rank, std::move(barrier));
  windowSliceProgram(executor,
                     {rank, static_cast<int>(n), call.count, lineElems, pieceElems, false});
  return executor.takePhases();
}

}  // namespace coil::algo
