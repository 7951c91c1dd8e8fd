#include "algorithms/registered_collectives.h"

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

// The vocabulary of window_programs.h for the direct programs: slot 0 of
// rank q is its input, slot 1 its output, both mapped here. GPU work
// gathers until a wait, which closes a phase with a host barrier (the
// first one with the caller's first barrier). Offsets and counts are in
// elements.
class DeviceDirectExecutor {
 public:
  DeviceDirectExecutor(const DeviceCall& call, const std::vector<const void*>& peerSend,
                       const std::vector<const void*>& peerRecv, int rank,
                       std::function<void()> firstBarrier, std::function<void()> barrier)
      : call_(call),
        peerSend_(peerSend),
        peerRecv_(peerRecv),
        rank_(rank),
        esize_(reduce::typeSize(call.type)),
        firstBarrier_(std::move(firstBarrier)),
        barrier_(std::move(barrier)) {}

  uint32_t nextStep() const { return 1; }
  void post(uint32_t, int) {}
  void wait(uint32_t, size_t) {
    phases_.closePhase(phases_.phasesClosed() == 0 ? firstBarrier_ : barrier_);
  }
  void joined() {}
  void done() {}

  void reduceToOutput(int slot, size_t at, size_t out, size_t n, OwnTerm own, bool) {
    if (slot != 0) fail(coilInternalError, "direct program: a reduction of outputs");
    const int nranks = static_cast<int>(peerSend_.size());
    std::vector<const void*> terms;
    for (int q = 0; q < nranks; ++q)
      terms.push_back(q == rank_ && own == OwnTerm::kInput ? offsetBy(call_.sendbuff, out)
                                                           : slotAt(q, 0, at));
    // In place, dst is this rank's own term: one chain launch reads all of
    // an element's terms before it writes it (device_reduce.h).
    phases_.reduceTerms(static_cast<uint8_t*>(call_.recvbuff) + out * esize_, std::move(terms), n,
                        call_.type, call_.op);
  }

  void copyOut(int owner, int slot, size_t at, size_t out, size_t n) {
    void* dst = static_cast<uint8_t*>(call_.recvbuff) + out * esize_;
    const void* src = slotAt(owner, slot, at);
    const size_t bytes = n * esize_;
    if (src == dst) return;  // an all-gather's own block, in place
    phases_.gpu([=](Stream s) { device::copyAsync(dst, src, bytes, s); });
  }

  // Not in the direct program's vocabulary.
  void put(int, size_t, size_t, size_t, bool) { fail(coilInternalError, "direct program: put"); }
  void reduceToSlot(int, size_t, int, size_t, size_t) {
    fail(coilInternalError, "direct program: reduceToSlot");
  }

  std::vector<Phase> takePhases() { return phases_.take(); }

 private:
  const void* offsetBy(const void* base, size_t elems) const {
    return static_cast<const uint8_t*>(base) + elems * esize_;
  }
  // Rank q's input (slot 0) or output (slot 1) at `elems`, as mapped here.
  const void* slotAt(int q, int slot, size_t elems) const {
    const void* base = (slot == 0 ? peerSend_ : peerRecv_)[static_cast<size_t>(q)];
    if (base == nullptr)
      fail(coilInternalError, "direct program: rank ", q, "'s ", slot == 0 ? "input" : "output",
           " is not mapped");
    return offsetBy(base, elems);
  }

  const DeviceCall call_;
  const std::vector<const void*>& peerSend_;
  const std::vector<const void*>& peerRecv_;
  const int rank_;
  const size_t esize_;
  const std::function<void()> firstBarrier_, barrier_;
  PhaseRecorder phases_;
};

}  // namespace

std::vector<Phase> registeredPhases(CollKind kind, const DeviceCall& call,
                                    const std::vector<const void*>& peerSend,
                                    const std::vector<const void*>& peerRecv, int rank,
                                    std::function<void()> firstBarrier,
                                    std::function<void()> barrier) {
  const int nranks = static_cast<int>(peerSend.size());
  if (nranks < 2 || peerRecv.size() != peerSend.size() || rank < 0 || rank >= nranks)
    fail(coilInternalError, "registered ", collName(kind), ": ", peerSend.size(),
         " inputs and ", peerRecv.size(), " outputs for rank ", rank);
  const size_t esize = reduce::typeSize(call.type);
  DeviceDirectExecutor executor(call, peerSend, peerRecv, rank, std::move(firstBarrier),
                                std::move(barrier));
  const size_t lineElems = std::max<size_t>(1, kDeviceSliceAlignBytes / esize);
  const WindowShape shape{rank, nranks, call.count, lineElems, 0, false, call.root};
  switch (kind) {
    case CollKind::AllReduce: windowDirectProgram(executor, shape); break;
    case CollKind::AllGather: windowDirectAllGatherProgram(executor, shape); break;
    case CollKind::ReduceScatter: windowDirectReduceScatterProgram(executor, shape); break;
    case CollKind::Broadcast: windowDirectBroadcastProgram(executor, shape); break;
    case CollKind::Reduce: windowDirectReduceProgram(executor, shape); break;
    case CollKind::AllToAll: windowDirectAllToAllProgram(executor, shape); break;
    default: fail(coilInternalError, "no registered program for ", collName(kind));
  }
  return executor.takePhases();
}

}  // namespace coil::algo
