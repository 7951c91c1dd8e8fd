// Window: a communicator-wide shared-memory scratch area, for collectives
// whose ranks all live on one host.
//
// The FIFOs of slot_fifo.h connect pairs of ranks; some algorithms want more:
// every rank reading every other rank's data at once (one-shot and
// slice-parallel all-reduce, src/algorithms/window_allreduce.h). A Window
// gives each rank
//
//   - kSlots scratch slots of slotBytes() each, which only their owner writes
//     and every rank may read;
//   - with each slot, an inline area of kInlineBytes in cache lines that
//     each carry their own copy of the step: a peer polling them fetches
//     the step and a small message at once (all lines in parallel) instead
//     of the flag first and then the data;
//   - steps: every rank runs the same sequence of steps; post(s) publishes
//     this rank's step s, waitAll(s) returns once every rank has posted s.
//     That is the only synchronisation there is.
//
// The protocol an algorithm follows (window_programs.h states it in full):
// at step s a rank writes its slot s % kSlots, stamps it, posts s, waits
// until all ranks have posted s, then reads their step-s slots, and only
// before it posts s + 1. Because no rank can post s + 1 before every rank
// posted s, and kSlots >= 2, a slot is never overwritten while a peer still
// reads it. Step numbers are 32-bit and wrap; comparisons are wrapping
// differences.
//
// Waits follow the rules of every coil wait (core/deadline.h): they poll for
// a while (setPolling), then sleep on a futex in slices of at most
// kWaitSliceMs, between which they check the communicator's abort flag, the
// peers' closed flags and whether the peers' processes still exist, until
// the deadline. All sleepers sleep on one word, woken once per step, by the
// last rank to post it — with more ranks than cores that matters.
//
// A Window exists only when every rank of the communicator is on this host
// (openHostWindow returns nullptr on every rank otherwise). Nothing is left
// in /dev/shm once it is open, whatever happens later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "transports/slot_fifo.h"
#include "transports/transport.h"

namespace coil::transport {

class Window {
 public:
  /// Scratch slots per rank. Two are what the step protocol needs.
  static constexpr int kSlots = 2;
  /// Bytes of a slot's inline area (putInline/getInline).
  static constexpr size_t kInlineBytes = 1908;

  virtual ~Window() = default;

  /// This rank and the communicator's size.
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  /// Bytes of each slot (a multiple of 4096, the same on every rank).
  virtual size_t slotBytes() const = 0;

  /// Start of slot `index` (< kSlots) of rank `owner`. Page aligned. Write
  /// only your own; read anyone's (after waiting for the step that filled it).
  virtual uint8_t* slot(int owner, int index) const = 0;
  /// Writes `bytes` (<= kInlineBytes) into this rank's inline area of slot
  /// `index`, stamping each line with `step` (the step about to be posted).
  virtual void putInline(int index, const void* data, size_t bytes, uint32_t step) = 0;
  /// Copies `bytes` of rank owner's inline area of slot `index` to `out`
  /// (after waitAll of the step that filled it).
  virtual void getInline(int owner, int index, void* out, size_t bytes) const = 0;
  /// Stamps this rank's slot `index` with the call's fingerprint and
  /// algorithm, so a reader can tell a mismatched program from data.
  virtual void stamp(int index, uint64_t tag, uint32_t algorithm) = 0;
  /// The stamp of rank owner's slot `index`.
  virtual uint64_t stampTag(int owner, int index) const = 0;
  virtual uint32_t stampAlgorithm(int owner, int index) const = 0;
  /// The stamp of the last step rank `owner` posted (0 before its first):
  /// which call a peer is in, for a rank that waits elsewhere.
  virtual uint64_t latestStampTag(int owner) const = 0;

  /// The last step this rank posted (0 before the first).
  virtual uint32_t posted() const = 0;
  /// Publishes `step` (release: every write before it is visible to a rank
  /// whose waitAll(step) returned). Must be posted() + 1.
  virtual void post(uint32_t step) = 0;
  /// How the next waits wait: poll for `us` (0: only the short spin of
  /// every coil wait), calling sched_yield() between polls when `yield`
  /// (ranks that share a core hand it to each other), then sleep.
  virtual void setPolling(int us, bool yield) = 0;
  /// Waits until every rank has posted `step`. Returns false on abort, on
  /// the close or death of a peer that has not posted it, or at the
  /// deadline, with *why and the peer concerned in *peer. `inlineBytes`:
  /// how much of the step's inline areas the caller will read, so that
  /// polling fetches those lines too.
  virtual bool waitAll(uint32_t step, const WaitWatch& watch, int* peer, WaitFailure* why,
                       size_t inlineBytes = 0) = 0;
  /// A peer that broke (close(true)), or -1. Checked after a wait, so that
  /// a peer that broke over a mismatch is reported as the mismatch.
  virtual int brokenPeer() const = 0;
  /// The peers that have not posted `step` (yet), in rank order: what a
  /// timeout names. Empty where the window cannot tell.
  virtual std::vector<int> notPosted(uint32_t /*step*/) const { return {}; }

  /// This rank is gone. `broken` (error or abort): brokenPeer() names it, and
  /// peers fail their current step even if this rank already posted it — a
  /// broken communicator completes no collective, and its peers should
  /// learn that at once. Not broken (destroy after success): steps posted
  /// before count, later waits end with PeerClosed. Idempotent (a later
  /// broken close upgrades a normal one), thread-safe, never blocks.
  virtual void close(bool broken) noexcept = 0;
  /// Name for messages ("shm window").
  virtual const char* name() const = 0;
};

/// What openHostWindow is asked for.
struct WindowOptions {
  size_t slotBytes;  // rounded up to 4096
  int spinUs;        // initial setSpinUs()
};

/// Collective over the whole communicator (every rank calls it, after the
/// transports are connected): when every rank is on this host, each rank
/// creates its segment, the names are allGathered, every rank attaches
/// every other's, they agree that all attached, and the names are unlinked.
/// Returns nullptr on every rank when some rank is on another host, when a
/// rank asked for no window (`wanted` false, e.g. COIL_TRANSPORT=tcp), when
/// a rank could not create or attach a segment (logged), or for one rank.
std::unique_ptr<Window> openHostWindow(SetupContext& ctx, bool wanted,
                                       const WindowOptions& options);

}  // namespace coil::transport
