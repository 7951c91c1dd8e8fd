// The all-reduce of device buffers that every rank registered as a window
// (coilCommWindowRegister; api/registered_windows.h maps them): the direct
// program of window_programs.h, whose "slots" are the ranks' own input and
// output, read in place, so no byte goes through a slot. Its executor here
// turns each step into GPU work on the caller's stream and each wait into
// a host barrier between StagedStream phases, as DeviceWindowExecutor does
// for the slice program (device_window_allreduce.h):
//
//   (wait for every rank's stream to reach the call)          | barrier
//   reduce my slice of every rank's input into my output       | barrier
//   copy every other rank's slice of its output into mine      | barrier
//
// The reduce is one chain kernel over the n terms in rank order (the host
// engine's bits, device_reduce.h), this rank's own term from its input. The
// first barrier is the caller's `firstBarrier`, which also compares where
// each rank's buffers sit in their windows: a rank reads its peers at its
// own offsets, so ranks that disagree fail the call before anyone reads.
// Reads of a peer stay inside its window, which has the size of the
// reader's (registration checks it), and every write is to the rank's own
// output: even a failed call cannot touch a peer's memory.
//
// Per rank, with S bytes and n ranks: the reduce reads S and writes S / n,
// the copies read and write (n - 1) S / n. docs/performance.md §4.14
// compares it with the peer windows' path, which copies every input into a
// slot first. coil-sim shows it: `coil-sim allreduce --algo registered`.
#pragma once

#include <functional>
#include <vector>

#include "algorithms/device_window_allreduce.h"
#include "device/staged_stream.h"

namespace coil::algo {

/// The three phases of one all-reduce on rank `rank`. `peerSend[q]` and
/// `peerRecv[q]` are rank q's buffers as mapped in this process (this
/// rank's own at [rank]); at least 2 ranks.
std::vector<device::StagedStream::Phase> registeredAllReducePhases(
    const DeviceAllReduceCall& call, const std::vector<const void*>& peerSend,
    const std::vector<const void*>& peerRecv, int rank, std::function<void()> firstBarrier,
    std::function<void()> barrier);

}  // namespace coil::algo
