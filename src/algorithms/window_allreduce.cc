// The window all-reduces (window_programs.h) on real data: WindowExecutor
// gives the programs' vocabulary its meaning over a transport::Window. The
// step protocol, the programs and their costs are in window_programs.h; the
// measurements in docs/performance.md §1.
#include "algorithms/window_allreduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/fingerprint.h"
#include "algorithms/stream_copy.h"
#include "algorithms/window_programs.h"
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

void plainCopy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

const char* algorithmName(uint32_t algorithm) {
  switch (static_cast<WindowAlgorithm>(algorithm)) {
    case WindowAlgorithm::kOneShot: return "oneshot";
    case WindowAlgorithm::kSlice: return "slice";
  }
  return "(unknown)";
}

// The programs' vocabulary over a real Window (window_programs.h). All of
// its waiting is in wait(): the deadline, abort, the peers' liveness and the
// check that every peer's slot belongs to this call.
class WindowExecutor {
 public:
  WindowExecutor(Window& w, const Call& call, WindowAlgorithm algorithm,
                 bool streamStores = false, int lockstepSpinUs = 0)
      : w_(w),
        rank_(w.rank()),
        nranks_(w.nranks()),
        call_(call),
        watch_(call.watch),
        algorithm_(static_cast<uint32_t>(algorithm)),
        esize_(call.elementBytes),
        reduce_(reduce::kernel(call.type, call.reduceOp)),
        divide_(call.reduceOp == coilAvg ? reduce::divider(call.type) : nullptr),
        copyOut_(streamStores ? streamCopy : plainCopy),
        streamStores_(streamStores),
        lockstepSpinUs_(lockstepSpinUs),
        in_(static_cast<const uint8_t*>(call.input)),
        out_(static_cast<uint8_t*>(call.output)) {}

  uint32_t nextStep() const { return w_.posted() + 1; }

  void put(int slot, size_t in, size_t at, size_t n, bool inlined) {
    if (inlined) w_.putInline(slot, in_ + in * esize_, n * esize_, nextStep());
    else std::memcpy(w_.slot(rank_, slot) + at * esize_, in_ + in * esize_, n * esize_);
  }

  void post(uint32_t step, int slot) {
    w_.stamp(slot, call_.tag, algorithm_);
    w_.post(step);
  }

  void wait(uint32_t step, size_t inlineElems) {
    int peer = -1;
    WaitFailure why{};
    if (!w_.waitAll(step, watch_, &peer, &why, inlineElems * esize_)) failWait(peer, why, step);
    const int slot = static_cast<int>(step % Window::kSlots);
    for (int q = 0; q < nranks_; ++q) {
      if (q == rank_) continue;
      const uint64_t tag = w_.stampTag(q, slot);
      if (tag != call_.tag)
        fail(coilInvalidUsage, call_.description(), ": mismatched collective with rank ", q, ": ",
             explainMismatch(tag, call_.tag));
      const uint32_t algorithm = w_.stampAlgorithm(q, slot);
      if (algorithm != algorithm_)
        fail(coilInvalidUsage, call_.description(), ": rank ", q, " runs all-reduce algorithm ",
             algorithmName(algorithm), " where this rank runs ", algorithmName(algorithm_),
             ": COIL_ALGO must be the same on every rank");
    }
    // A peer that broke fails this call even if it posted this step.
    if (int q = w_.brokenPeer(); q >= 0) failWait(q, WaitFailure::PeerClosed);
  }

  void reduceToOutput(int slot, size_t at, size_t out, size_t n, OwnTerm own, bool inlined) {
    void* dst = out_ + out * esize_;
    if (inlined) {
      // The n inputs side by side, copied out of the inline lines: on the
      // stack when small (no TLS lookup).
      const size_t bytes = n * esize_;
      alignas(64) uint8_t local[4096];
      thread_local std::vector<uint8_t> large;
      const size_t all = bytes * static_cast<size_t>(nranks_);
      uint8_t* inputs = local;
      if (all > sizeof local) inputs = (large.resize(all), large.data());
      for (int q = 0; q < nranks_; ++q) {
        uint8_t* x = inputs + static_cast<size_t>(q) * bytes;
        if (q == rank_) std::memcpy(x, in_ + out * esize_, bytes);
        else w_.getInline(q, slot, x, bytes);
      }
      reduceInRankOrder(dst, n, [&](int q) { return inputs + static_cast<size_t>(q) * bytes; });
    } else {
      reduceInRankOrder(dst, n, [&](int q) -> const void* {
        return q == rank_ && own == OwnTerm::kInput ? in_ + out * esize_
                                                        : w_.slot(q, slot) + at * esize_;
      });
    }
    if (divide_) divide_(dst, dst, n, nranks_);
  }

  void reduceToSlot(int from, size_t at, int to, size_t n, size_t in) {
    uint8_t* dst = w_.slot(rank_, to) + at * esize_;
    reduceInRankOrder(dst, n, [&](int q) -> const void* {
      return q == rank_ ? in_ + in * esize_ : w_.slot(q, from) + at * esize_;
    });
    if (divide_) divide_(dst, dst, n, nranks_);
  }

  void copyOut(int owner, int slot, size_t at, size_t out, size_t n) {
    copyOut_(out_ + out * esize_, w_.slot(owner, slot) + at * esize_, n * esize_);
  }

  void joined() {
    if (lockstepSpinUs_ > 0) w_.setPolling(lockstepSpinUs_, true);
  }

  void done() {
    if (streamStores_) streamFence();
  }

 private:
  // dst = x0 ⊕ x1 ⊕ ... in rank order; src(q) gives rank q's term.
  template <typename Source>
  void reduceInRankOrder(void* dst, size_t n, Source&& src) {
    reduce_(dst, src(0), src(1), n);
    for (int q = 2; q < nranks_; ++q) reduce_(dst, dst, src(q), n);
  }

  [[noreturn]] void failWait(int peer, WaitFailure why, uint32_t step = 0) {
    switch (why) {
      case WaitFailure::Timeout: {
        // Every rank that had not posted the step, not only the first.
        std::vector<int> missing = w_.notPosted(step);
        if (missing.empty()) missing.push_back(peer);
        fail(coilTimeout, call_.description(), ": timed out after ", watch_.deadline.totalMs(),
             " ms waiting for ", rankList(missing), " (", w_.name(), "); ",
             missing.size() == 1 ? "the peer" : "these peers",
             " may be stuck, slower, or in a different call");
      }
      case WaitFailure::PeerClosed:
        fail(coilRemoteError, call_.description(), ": rank ", peer, " closed its connection (",
             w_.name(), ") — it failed, aborted or exited");
      case WaitFailure::PeerDied:
        fail(coilRemoteError, call_.description(), ": rank ", peer,
             " died (its process is gone)");
      case WaitFailure::Aborted:
        fail(coilRemoteError, call_.description(), ": communicator aborted");
    }
    fail(coilInternalError, "unknown wait failure");
  }

  Window& w_;
  // The window's, read once: its accessors are virtual calls, and the
  // one-shot's loops ask for them per rank on a 0.2 µs path.
  int rank_;
  int nranks_;
  const Call& call_;
  const transport::WaitWatch& watch_;
  uint32_t algorithm_;
  size_t esize_;
  reduce::ReduceFn reduce_;
  reduce::DivideFn divide_;  // nullptr unless coilAvg
  void (*copyOut_)(void*, const void*, size_t);
  bool streamStores_;
  int lockstepSpinUs_;
  const uint8_t* in_;
  uint8_t* out_;
};

}  // namespace

size_t windowOneShotMaxBytes(const Window& window) { return window.slotBytes(); }

void windowOneShotAllReduce(Window& w, const Call& call) {
  if (call.bytes > windowOneShotMaxBytes(w))
    fail(coilInternalError, "one-shot all-reduce of ", call.bytes, " bytes exceeds the ",
         windowOneShotMaxBytes(w), "-byte window slot");
  WindowExecutor exec(w, call, WindowAlgorithm::kOneShot);
  windowOneShotProgram(exec, WindowShape{w.rank(), w.nranks(), call.count, 1, call.count,
                                         call.bytes <= Window::kInlineBytes});
}

void windowSliceAllReduce(Window& w, const Call& call, const SliceOptions& options) {
  const size_t esize = call.elementBytes;
  const size_t n = static_cast<size_t>(w.nranks());
  const size_t lineElems = std::max<size_t>(1, kLineBytes / esize);
  // A piece is a whole number of cache-line slices per rank.
  const size_t unit = lineElems * n;
  const size_t pieceElems =
      std::max(unit, std::min(options.pieceBytes, w.slotBytes()) / esize / unit * unit);
  if (pieceElems * esize > w.slotBytes())
    fail(coilInternalError, "slice all-reduce: ", n, " cache-line slices do not fit a ",
         w.slotBytes(), "-byte window slot");
  WindowExecutor exec(w, call, WindowAlgorithm::kSlice, options.streamStores,
                      options.lockstepSpinUs);
  windowSliceProgram(exec, WindowShape{w.rank(), w.nranks(), call.count, lineElems, pieceElems,
                                       false});
}

}  // namespace coil::algo
