// One-shot and slice-parallel all-reduce over a shared-memory Window.
//
// The step protocol (transports/window.h): at step s a rank writes its slot
// s % 2, stamps it, posts s, and waits until EVERY rank has posted s before
// it reads their step-s slots — even when it has nothing to read — and reads
// them only before it posts s + 1. Hence when a rank writes slot s % 2 again
// at step s + 2, every peer has posted s + 1 and so is done with step s.
//
// One-shot, rank r (one step; up to Window::kInlineBytes travel in the
// slot's inline lines, with the step, instead of the slot):
//     slot[s%2] ← input;  post s;  wait all ≥ s;
//     output ← x0 ⊕ x1 ⊕ ... ⊕ x(n-1), each x from its owner's slot
// Every rank reduces all n inputs in rank order: identical bits everywhere.
//
// Slice, rank r, for each piece (two steps; A = s%2, B = (s+1)%2):
//     step s:    slot[A] ← input's slices q ≠ r;  post s;  wait all ≥ s
//                slot[B] slice r ← x0 ⊕ ... ⊕ x(n-1)  (x_r from input, others from slot[A]s)
//     step s+1:  post s+1;  output slice r ← slot[B];  wait all ≥ s+1;
//                output slice q ← rank q's slot[B] slice q, for q ≠ r
// Writing slot[B] at step s is safe: B held step s-1, which every peer
// finished before posting s, and we have waited for all of them to post s.
// In place works: a piece's input slices are read (copied out or reduced)
// before the same piece's output slices are written, pieces are disjoint.
//
// Cost per rank (S bytes, n ranks, pieces of P bytes, α one handshake, β a
// copy byte, γ a reduce byte): one-shot  α + S·β + (n-1)·S·γ;
// slice  2·⌈S/P⌉·α + 2·S·β + (n-1)/n·S·γ (src/tune/tuner.cc).
#include "algorithms/window_allreduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/fingerprint.h"
#include "algorithms/stream_copy.h"
#include "core/error.h"
#include "core/rank_list.h"
#include "reduce/reduce.h"

namespace coil::algo {
namespace {

using transport::WaitFailure;
using transport::Window;

// Slices start on cache-line boundaries so that two ranks never write the
// same line of a slot or of the output.
constexpr size_t kLineBytes = 64;

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

void plainCopy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

// The part of the protocol both algorithms share: steps, waits, stamps.
class Stepper {
 public:
  Stepper(Window& w, const ReduceCall& call, const transport::WaitWatch& watch,
          WindowAlgorithm algorithm)
      : w_(w), call_(call), watch_(watch), algorithm_(static_cast<uint32_t>(algorithm)) {}

  /// The next step number and the slot it writes.
  uint32_t nextStep() const { return w_.posted() + 1; }
  static int slotOf(uint32_t step) { return static_cast<int>(step % Window::kSlots); }

  void post(uint32_t step, int slot) {
    w_.stamp(slot, call_.tag, algorithm_);
    w_.post(step);
  }

  /// Waits until every rank posted `step`, then checks that every peer's
  /// slot belongs to this call.
  void waitForAll(uint32_t step, size_t inlineBytes = 0) {
    int peer = -1;
    WaitFailure why{};
    if (!w_.waitAll(step, watch_, &peer, &why, inlineBytes)) failWait(peer, why, step);
    const int slot = slotOf(step);
    for (int q = 0; q < w_.nranks(); ++q) {
      if (q == w_.rank()) continue;
      const uint64_t tag = w_.stampTag(q, slot);
      if (tag != call_.tag)
        fail(coilInvalidUsage, (*call_.describe)(), ": mismatched collective with rank ", q, ": ",
             explainMismatch(tag, call_.tag));
      const uint32_t algorithm = w_.stampAlgorithm(q, slot);
      if (algorithm != algorithm_)
        fail(coilInvalidUsage, (*call_.describe)(), ": rank ", q, " runs all-reduce algorithm ",
             name(algorithm), " where this rank runs ", name(algorithm_),
             ": COIL_ALGO must be the same on every rank");
    }
    // A peer that broke fails this call even if it posted this step.
    if (int q = w_.brokenPeer(); q >= 0) failWait(q, WaitFailure::PeerClosed);
  }

 private:
  static const char* name(uint32_t algorithm) {
    switch (static_cast<WindowAlgorithm>(algorithm)) {
      case WindowAlgorithm::kOneShot: return "oneshot";
      case WindowAlgorithm::kSlice: return "slice";
    }
    return "(unknown)";
  }

  [[noreturn]] void failWait(int peer, WaitFailure why, uint32_t step = 0) {
    switch (why) {
      case WaitFailure::Timeout: {
        // Every rank that had not posted the step, not only the first.
        std::vector<int> missing = w_.notPosted(step);
        if (missing.empty()) missing.push_back(peer);
        fail(coilTimeout, (*call_.describe)(), ": timed out after ", watch_.deadline.totalMs(),
             " ms waiting for ", rankList(missing), " (", w_.name(), "); ",
             missing.size() == 1 ? "the peer" : "these peers",
             " may be stuck, slower, or in a different call");
      }
      case WaitFailure::PeerClosed:
        fail(coilRemoteError, (*call_.describe)(), ": rank ", peer, " closed its connection (",
             w_.name(), ") — it failed, aborted or exited");
      case WaitFailure::PeerDied:
        fail(coilRemoteError, (*call_.describe)(), ": rank ", peer,
             " died (its process is gone)");
      case WaitFailure::Aborted:
        fail(coilRemoteError, (*call_.describe)(), ": communicator aborted");
    }
    fail(coilInternalError, "unknown wait failure");
  }

  Window& w_;
  const ReduceCall& call_;
  const transport::WaitWatch& watch_;
  uint32_t algorithm_;
};

// dst = x0 ⊕ x1 ⊕ ... in rank order; src(q) gives rank q's input.
template <typename Source>
void reduceInRankOrder(reduce::ReduceFn fn, int n, void* dst, size_t count, Source&& src) {
  fn(dst, src(0), src(1), count);
  for (int q = 2; q < n; ++q) fn(dst, dst, src(q), count);
}

}  // namespace

size_t windowOneShotMaxBytes(const Window& window) { return window.slotBytes(); }

void windowOneShotAllReduce(Window& w, const ReduceCall& call,
                            const transport::WaitWatch& watch) {
  const size_t esize = reduce::typeSize(call.type);
  const size_t bytes = call.count * esize;
  if (bytes > windowOneShotMaxBytes(w))
    fail(coilInternalError, "one-shot all-reduce of ", bytes, " bytes exceeds the ",
         windowOneShotMaxBytes(w), "-byte window slot");
  const reduce::ReduceFn fn = reduce::kernel(call.type, call.op);
  const int n = w.nranks();
  Stepper steps(w, call, watch, WindowAlgorithm::kOneShot);

  const uint32_t s = steps.nextStep();
  const int slot = Stepper::slotOf(s);
  if (bytes <= Window::kInlineBytes) {
    // Small: the data travels in the slot's inline lines, with the step.
    w.putInline(slot, call.input, bytes, s);
    steps.post(s, slot);
    steps.waitForAll(s, bytes);
    // The n inputs side by side: on the stack when small (no TLS lookup).
    alignas(64) uint8_t local[4096];
    thread_local std::vector<uint8_t> large;
    const size_t all = bytes * static_cast<size_t>(n);
    uint8_t* inputs = local;
    if (all > sizeof local) inputs = (large.resize(all), large.data());
    for (int q = 0; q < n; ++q) {
      uint8_t* dst = inputs + static_cast<size_t>(q) * bytes;
      if (q == w.rank()) std::memcpy(dst, call.input, bytes);
      else w.getInline(q, slot, dst, bytes);
    }
    reduceInRankOrder(fn, n, call.output, call.count,
                      [&](int q) { return inputs + static_cast<size_t>(q) * bytes; });
  } else {
    std::memcpy(w.slot(w.rank(), slot), call.input, bytes);
    steps.post(s, slot);
    steps.waitForAll(s);
    // All inputs from the slots (our own too): in place, call.input is the output.
    reduceInRankOrder(fn, n, call.output, call.count, [&](int q) { return w.slot(q, slot); });
  }
  if (call.op == coilAvg) reduce::divider(call.type)(call.output, call.output, call.count, n);
}

void windowSliceAllReduce(Window& w, const ReduceCall& call, const transport::WaitWatch& watch,
                          const SliceOptions& options) {
  const size_t esize = reduce::typeSize(call.type);
  const int n = w.nranks();
  const int r = w.rank();
  const size_t lineElems = std::max<size_t>(1, kLineBytes / esize);
  // A piece is a whole number of cache-line slices per rank.
  const size_t unit = lineElems * static_cast<size_t>(n);
  const size_t pieceElems =
      std::max(unit, std::min(options.pieceBytes, w.slotBytes()) / esize / unit * unit);
  if (pieceElems * esize > w.slotBytes())
    fail(coilInternalError, "slice all-reduce: ", n, " cache-line slices do not fit a ",
         w.slotBytes(), "-byte window slot");
  const reduce::ReduceFn fn = reduce::kernel(call.type, call.op);
  const reduce::DivideFn divide = call.op == coilAvg ? reduce::divider(call.type) : nullptr;
  const auto* in = static_cast<const uint8_t*>(call.input);
  auto* out = static_cast<uint8_t*>(call.output);
  void (*copyOut)(void*, const void*, size_t) = options.streamStores ? streamCopy : plainCopy;
  Stepper steps(w, call, watch, WindowAlgorithm::kSlice);

  for (size_t base = 0; base < call.count; base += pieceElems) {
    const size_t len = std::min(pieceElems, call.count - base);
    const size_t sliceElems = roundUp((len + n - 1) / n, lineElems);
    auto sliceBegin = [&](int q) { return std::min(len, static_cast<size_t>(q) * sliceElems); };
    auto sliceCount = [&](int q) { return sliceBegin(q + 1) - sliceBegin(q); };
    const size_t mine = sliceBegin(r), myCount = sliceCount(r);

    // Step s: hand every other rank its slice of our input.
    const uint32_t s = steps.nextStep();
    const int a = Stepper::slotOf(s), b = Stepper::slotOf(s + 1);
    uint8_t* contrib = w.slot(r, a);
    for (int q = 0; q < n; ++q)
      if (q != r && sliceCount(q) != 0)
        std::memcpy(contrib + sliceBegin(q) * esize, in + (base + sliceBegin(q)) * esize,
                    sliceCount(q) * esize);
    steps.post(s, a);
    steps.waitForAll(s);
    if (base == 0 && options.lockstepSpinUs > 0) w.setPolling(options.lockstepSpinUs, true);

    // Reduce our slice from every rank's contribution into our result slot.
    uint8_t* result = w.slot(r, b) + mine * esize;
    if (myCount != 0) {
      reduceInRankOrder(fn, n, result, myCount, [&](int q) -> const void* {
        return q == r ? in + (base + mine) * esize : w.slot(q, a) + mine * esize;
      });
      if (divide) divide(result, result, myCount, n);
    }

    // Step s + 1: publish it, keep it, and collect everyone else's.
    steps.post(s + 1, b);
    if (myCount != 0) copyOut(out + (base + mine) * esize, result, myCount * esize);
    steps.waitForAll(s + 1);
    for (int q = 0; q < n; ++q)
      if (q != r && sliceCount(q) != 0)
        copyOut(out + (base + sliceBegin(q)) * esize, w.slot(q, b) + sliceBegin(q) * esize,
                sliceCount(q) * esize);
  }
  if (options.streamStores) streamFence();
}

}  // namespace coil::algo
