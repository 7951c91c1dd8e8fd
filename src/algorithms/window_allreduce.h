// All-reduce through a shared-memory Window (transports/window.h), for
// communicators whose ranks all live on one host. Two algorithms:
//
//   one-shot  every rank copies its whole input into its slot, posts one
//             step, and reduces all n slots in rank order into its output.
//             One handshake: the latency choice for small messages.
//   slice     the buffer is cut into pieces of one slot; each piece into n
//             slices. Rank r reduces slice r of every piece from all n
//             inputs and publishes it; every rank then copies the other
//             slices out. Each rank moves ~2S bytes and reduces S/n: the
//             bandwidth choice for large messages.
//
// Both reduce every element in the fixed order x0 ⊕ x1 ⊕ ... ⊕ x(n-1) (and
// finish coilAvg once), so every rank ends with the same bits, run after run.
// The programs, their step protocol and costs: window_programs.h (coil-sim
// shows them: docs/algorithms.md); measurements: docs/performance.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/call.h"
#include "transports/window.h"

namespace coil::algo {

/// Which window algorithm wrote a slot (stamped next to the call's
/// fingerprint, so ranks that disagree on COIL_ALGO fail loudly).
enum class WindowAlgorithm : uint32_t { kOneShot = 1, kSlice = 2 };

/// Tuning of the slice algorithm.
struct SliceOptions {
  size_t pieceBytes;   // bytes of one piece (<= the window's slot size)
  bool streamStores;   // write the output with non-temporal stores
  /// Once every rank has joined the call (its first step), later steps poll
  /// for up to this long before sleeping (0: keep the caller's polling),
  /// with sched_yield() between polls. The ranks then work through the same
  /// pieces in lockstep and post within microseconds of each other: a futex
  /// sleep per step would add a wake-up (25-100 µs on a busy host) to every
  /// piece. Yielding, not pausing: when the scheduler has put two ranks on
  /// one core (on the 2-vCPU reference machine it does, for seconds at a
  /// time: a 2-rank 28 MB all-reduce then takes 15-18 ms instead of 5, and
  /// with each rank bound to its own core never), a pausing rank burns the
  /// time its peer needs; a yielding one hands it over.
  int lockstepSpinUs = 0;
};

/// The largest message (bytes) windowOneShotAllReduce accepts.
size_t windowOneShotMaxBytes(const transport::Window& window);

/// One-shot all-reduce; requires call.bytes <= windowOneShotMaxBytes. Waits
/// as call.watch says.
/// Throws coil::Error: coilRemoteError (peer closed, died, or abort),
/// coilTimeout, coilInvalidUsage (a peer is in a different call).
void windowOneShotAllReduce(transport::Window& window, const Call& call);

/// Slice-parallel all-reduce, any count. Throws like windowOneShotAllReduce.
void windowSliceAllReduce(transport::Window& window, const Call& call,
                          const SliceOptions& options);

}  // namespace coil::algo
