// The one-shot all-reduce over FIFOs, for ranks that share no window (across
// hosts, or with COIL_SHM_WINDOW=0): written once over a small vocabulary
// and run by three executors:
//   the caller-driven executor (fifo_oneshot.cc) — one message per peer over
//       transport::CallerIo (tcp's express socket), moved by the calling
//       thread alone: one loopback hop, no thread hand-off;
//   the FIFO executor (fifo_oneshot.cc) — one slot per peer through the
//       transport FIFOs, where some peer has no caller-driven path (or,
//       joined with the first, to those peers alone: shm inside hosts,
//       tcp across);
//   FifoOneShotTrace (fifo_oneshot_trace.h) — records every call, for the
//       schedule tests and coil-sim.
// The program is a template over the executor, so the real executors' calls
// are inlined: this path serves tcp's smallest all-reduces, where every
// microsecond counts.
//
// The executor's vocabulary ("block q": where rank q's whole input lands on
// this rank; the input is `count` elements):
//   send(q)        start sending my whole input to rank q (one message)
//   recvBlock(q)   start receiving rank q's whole input into block q
//   waitAll()      until every started send has left and every started receive
//                  has arrived (the one wait: deadline, abort, the peers'
//                  liveness, and that every arrival belongs to this call and
//                  has this call's byte count)
//   reduceBlocks() output ← fin(x0 ⊕ x1 ⊕ … ⊕ x(n-1)), xq = block q, this
//                  rank's own term from its input (right in place too)
//   done()         the program is over (the FIFO executor frees the slots
//                  reduceBlocks read)
// Every rank reduces in the fixed order x0 ⊕ … ⊕ x(n-1) and fin() (coilAvg's
// division) happens once per element, so every rank gets the same bits.
//
// Cost per rank (S bytes, n ranks; α one message's latency, β a byte over
// this rank's link, γ a reduced byte): α + (n-1)·S·β + (n-1)·S·γ. One
// message latency instead of the ring's 2(n-1), for (n-1)·S bytes sent:
// the latency choice when S is small (src/tune/tuner.cc, Model::predictUs).
#pragma once

#include <cstddef>

namespace coil::algo {

/// One FIFO one-shot all-reduce, as the program sees it.
struct FifoOneShotShape {
  int rank;
  int nranks;
  size_t count;  // elements
};

/// Every rank sends its input to every other rank and receives theirs, then
/// reduces all n in rank order. Peers are taken from the right neighbour
/// on, so that not every rank queues on rank 0 first.
template <class Executor>
void fifoOneShotProgram(Executor& x, const FifoOneShotShape& s) {
  for (int k = 1; k < s.nranks; ++k) {
    const int q = (s.rank + k) % s.nranks;
    x.recvBlock(q);
    x.send(q);
  }
  x.waitAll();
  x.reduceBlocks();
  x.done();
}

}  // namespace coil::algo
