// The collectives on device buffers that every rank registered as windows
// (coilCommWindowRegister; api/registered_windows.h maps them): the direct
// programs of window_programs.h, whose "slots" are the ranks' own input and
// output, read in place, so no byte goes through a slot. Their executor
// here turns each step into GPU work on the caller's stream and each wait
// into a host barrier between StagedStream phases, as DeviceWindowExecutor
// does for the slice program (device_window_collectives.h). The all-reduce:
//
//   (wait for every rank's stream to reach the call)          | barrier
//   reduce my slice of every rank's input into my output       | barrier
//   copy every other rank's slice of its output into mine      | barrier
//
// the all-gather: my block into my output | barrier | every other block
// from its owner's output | barrier; the broadcast: (the root) its input
// into its output | barrier | (the others) the root's output into mine |
// barrier; the reduce-scatter, the reduce and the all-to-all: | barrier |
// what I read of the peers' inputs (my block of every rank's, reduced; at
// the root, every rank's input, reduced; block r of every rank's into its
// block) | barrier.
//
// A reduction is one chain kernel over the n terms in rank order (the host
// engine's bits, device_reduce.h). The first barrier is the caller's
// `firstBarrier`, which also compares where each rank's buffers sit in their
// windows: a rank reads its peers at its own offsets, so ranks that
// disagree fail the call before anyone reads. Reads of a peer stay inside
// its window, which has the size of the reader's (registration checks it),
// and every write is to the rank's own output: even a failed call cannot
// touch a peer's memory.
//
// Per rank, all-reduce of S bytes on n ranks: the reduce reads S and writes
// S / n, the copies read and write (n - 1) S / n. docs/performance.md §4.14
// compares it with the peer windows' path, which copies every input into a
// slot first. coil-sim shows them: `coil-sim allreduce --algo registered`
// (allgather, reducescatter, broadcast, reduce, alltoall too).
#pragma once

#include <functional>
#include <vector>

#include "algorithms/device_window_collectives.h"
#include "algorithms/fingerprint.h"
#include "device/staged_stream.h"

namespace coil::algo {

/// The phases of one call of `kind` (any collective but the gather, the
/// scatter and the barrier; call.count as the C API's: per rank's block
/// where there are blocks) on rank `rank`. `peerSend[q]` and `peerRecv[q]` are rank q's
/// buffers as mapped in this process (this rank's own at [rank]); those the
/// program does not read may be null (the peers' inputs of an all-gather or
/// a broadcast, their outputs of the others but the all-reduce). At least 2
/// ranks.
std::vector<device::StagedStream::Phase> registeredPhases(
    CollKind kind, const DeviceCall& call, const std::vector<const void*>& peerSend,
    const std::vector<const void*>& peerRecv, int rank, std::function<void()> firstBarrier,
    std::function<void()> barrier);

}  // namespace coil::algo
