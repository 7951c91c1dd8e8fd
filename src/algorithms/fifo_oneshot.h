// One-shot all-reduce over transport FIFOs, for small messages on links
// without a shared window (tcp, or shm with the window turned off).
//
// Every rank sends its whole input to every other rank (one slot each),
// then reduces the n inputs in rank order, x0 ⊕ x1 ⊕ ... ⊕ x(n-1), and
// finishes coilAvg once. Every rank computes the same bits. The algorithm
// is fifoOneShotProgram (fifo_oneshot_program.h, with its cost); this runs
// it on real data.
//
// When every rank's connection to every peer offers a caller-driven path
// large enough (transport::CallerIo: tcp's express socket), the messages
// travel there, driven by the calling thread alone: one loopback hop, no
// thread hand-off. Where some links have one and others not (shm inside
// hosts, tcp across), each message takes its link's own. Otherwise they
// travel through the FIFOs.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/call.h"
#include "transports/transport.h"

namespace coil::algo {

/// Where the messages go, as all ranks agreed: the largest message every
/// rank's caller-driven paths to every peer carry (0 where a rank has a
/// peer without one), and, for communicators with links of both kinds, the
/// largest every link that has one carries (0: none, or not to be used).
struct OneShotPaths {
  size_t everyLink = 0;
  size_t whereLinksHave = 0;
};

/// Runs the one-shot for `rank`; `peers[q]` connects to rank q (nullptr for
/// this rank). The messages take the caller-driven paths when call.bytes <=
/// paths.everyLink; when call.bytes <= paths.whereLinksHave, those of the
/// links that have one, and the FIFOs elsewhere; else the FIFOs, whose slots
/// must then hold call.bytes. Waits as call.watch says.
/// `spinUs`: how long a caller-driven wait polls before it sleeps in poll(),
/// calling sched_yield() between polls when `yield`.
/// Throws coil::Error: coilRemoteError (peer closed, died, abort),
/// coilTimeout, coilInvalidUsage (the peer is in a different call).
void fifoOneShotAllReduce(const std::vector<transport::Connection*>& peers, int rank,
                          const Call& call, const OneShotPaths& paths, int spinUs, bool yield);

}  // namespace coil::algo
