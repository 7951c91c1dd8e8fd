#include "algorithms/device_window_collectives.h"

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
// phase with the host barrier (the first one with the caller's first
// barrier). Offsets and counts are in elements.
class DeviceWindowExecutor {
 public:
  DeviceWindowExecutor(const DeviceCall& call, const std::vector<DeviceWindow>& windows,
                       int rank, std::function<void()> firstBarrier,
                       std::function<void()> barrier)
      : call_(call),
        windows_(windows),
        rank_(rank),
        nranks_(static_cast<int>(windows.size())),
        esize_(reduce::typeSize(call.type)),
        firstBarrier_(std::move(firstBarrier)),
        barrier_(std::move(barrier)) {}

  uint32_t nextStep() const { return posted_ + 1; }

  void put(int slot, size_t in, size_t at, size_t n, bool /*inlined: never, on a device*/) {
    uint8_t* dst = slotOf(rank_, slot) + at * esize_;
    const uint8_t* src = input() + in * esize_;
    const size_t bytes = n * esize_;
    gpu([=](Stream s) { device::copyAsync(dst, src, bytes, s); });
  }

  void post(uint32_t step, int /*slot*/) { posted_ = step; }

  void wait(uint32_t /*step*/, size_t /*inlineElems*/) { closePhase(); }

  void reduceToSlot(int from, size_t at, int to, size_t n, size_t in) {
    uint8_t* dst = slotOf(rank_, to) + at * esize_;
    std::vector<const void*> terms;
    for (int q = 0; q < nranks_; ++q)
      terms.push_back(q == rank_ ? input() + in * esize_ : slotOf(q, from) + at * esize_);
    phases_.reduceTerms(dst, std::move(terms), n, call_.type, call_.op);
  }

  // Output [out, out+n) ← the n ranks' terms at `at` of slot `slot`; this
  // rank's own from its input at `out` (OwnTerm::kInput) or its slot.
  void reduceToOutput(int slot, size_t at, size_t out, size_t n, OwnTerm own,
                      bool /*inlined: never, on a device*/) {
    uint8_t* dst = static_cast<uint8_t*>(call_.recvbuff) + out * esize_;
    std::vector<const void*> terms;
    for (int q = 0; q < nranks_; ++q)
      terms.push_back(q == rank_ && own == OwnTerm::kInput ? input() + out * esize_
                                                           : slotOf(q, slot) + at * esize_);
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
  void done() { closePhase(); }

  std::vector<Phase> takePhases() { return phases_.take(); }

 private:
  const uint8_t* input() const { return static_cast<const uint8_t*>(call_.sendbuff); }
  uint8_t* slotOf(int rank, int slot) const {
    return windows_[static_cast<size_t>(rank)].slot[slot];
  }
  void gpu(PhaseRecorder::GpuWork work) { phases_.gpu(std::move(work)); }
  void closePhase() { phases_.closePhase(phases_.phasesClosed() == 0 ? firstBarrier_ : barrier_); }

  const DeviceCall call_;
  const std::vector<DeviceWindow>& windows_;
  const int rank_, nranks_;
  const size_t esize_;
  const std::function<void()> firstBarrier_, barrier_;
  uint32_t posted_ = 0;  // every call starts at step 1: slot 1, then slot 0
  PhaseRecorder phases_;
};

// Elements of a 256-byte line (kDeviceSliceAlignBytes), at least one.
size_t lineElemsOf(coilDataType_t type) {
  return std::max<size_t>(1, kDeviceSliceAlignBytes / reduce::typeSize(type));
}

// How many pieces of a block a collective's program puts side by side in
// a slot (window_programs.h, the peer programs).
size_t piecesPerSlot(CollKind kind, size_t nranks) {
  switch (kind) {
    case CollKind::ReduceScatter:
    case CollKind::AllToAll:
    case CollKind::Scatter: return nranks;
    default: return 1;
  }
}

}  // namespace

size_t deviceWindowPieceElems(CollKind kind, coilDataType_t type, size_t nranks,
                              size_t slotBytes) {
  const size_t esize = reduce::typeSize(type);
  const size_t lineElems = lineElemsOf(type);
  // The all-reduce: whole aligned slices for every rank in a piece (a
  // multiple of n lines). The others: whole lines of a block per piece,
  // as many side by side as the program puts in a slot.
  if (kind == CollKind::AllReduce)
    return slotBytes / esize / (nranks * lineElems) * (nranks * lineElems);
  return slotBytes / esize / piecesPerSlot(kind, nranks) / lineElems * lineElems;
}

std::vector<Phase> deviceWindowPhases(CollKind kind, const DeviceCall& call,
                                      const std::vector<DeviceWindow>& windows, size_t slotBytes,
                                      int rank, std::function<void()> firstBarrier,
                                      std::function<void()> barrier) {
  const size_t lineElems = lineElemsOf(call.type);
  const size_t n = windows.size();
  const size_t pieceElems = deviceWindowPieceElems(kind, call.type, n, slotBytes);
  if (pieceElems == 0)
    fail(coilInternalError, "device window ", collName(kind), ": a slot of ", slotBytes,
         " bytes is too small for ", n, " ranks' pieces of ", reduce::typeName(call.type));
  DeviceWindowExecutor executor(call, windows, rank, std::move(firstBarrier),
                                std::move(barrier));
  const WindowShape shape{rank,       static_cast<int>(n), call.count, lineElems,
                          pieceElems, false,               call.root};
  switch (kind) {
    case CollKind::AllReduce: windowSliceProgram(executor, shape); break;
    case CollKind::AllGather: windowPeerAllGatherProgram(executor, shape); break;
    case CollKind::ReduceScatter: windowPeerReduceScatterProgram(executor, shape); break;
    case CollKind::AllToAll: windowPeerAllToAllProgram(executor, shape); break;
    case CollKind::Broadcast: windowPeerBroadcastProgram(executor, shape); break;
    case CollKind::Reduce: windowPeerReduceProgram(executor, shape); break;
    case CollKind::Gather: windowPeerGatherProgram(executor, shape); break;
    case CollKind::Scatter: windowPeerScatterProgram(executor, shape); break;
    default: fail(coilInternalError, "no device window program for ", collName(kind));
  }
  return executor.takePhases();
}

}  // namespace coil::algo
