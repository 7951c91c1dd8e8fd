// Ring all-reduce = reduce-scatter, then all-gather.
//
// The buffer is processed in rounds of n chunks (chunking.h). In one round,
// rank r talks only to its neighbours: it receives from r-1 and sends to r+1.
// Chunk c starts at rank c, travels once around the ring collecting every
// rank's contribution, is completed by rank c-1, then travels around again so
// every rank gets the final value. Step table for rank r (chunks mod n):
//
//   step          primitive                chunk      what happens
//   0             send                     r          start chunk r
//   1 .. n-2      recvReduceSend           r-k        add my input, pass on
//   n-1           recvReduceCopySend       r+1        chunk r+1 is complete: keep it, pass on
//   n .. 2n-3     recvCopySend             r+1-j      a final chunk: keep it, pass on
//   2n-2          recv                     r+2        the last final chunk
//
// With n = 3, rank 0: send c0; recvReduceSend c2; recvReduceCopySend c1;
// recvCopySend c0; recv c2.   (coil-sim --ranks 3 prints all ranks.)
//
// Cost (S bytes, per rank): 2(n-1) steps, each moving S/n bytes, so
//   T = 2(n-1)·α + 2(n-1)/n·S·β + (n-1)/n·S·γ
// which is the bandwidth lower bound for all-reduce. Every element of chunk c
// is reduced in the same order (rank c, c+1, ..., c-1) on exactly one rank and
// then copied, so every rank ends with the same bits, run after run.
//
// Pipelining: a chunk is at most chunkElems, which the executor sets to half
// the FIFO depth, so every rank can post its whole step-0 chunk without
// waiting; later steps overlap receiving slice i+1 with reducing slice i.
#include "algorithms/ring.h"

#include "algorithms/chunking.h"

namespace coil::algo {

void ringAllReduce(Primitives& p, const CallShape& shape) {
  ringAllReduceOver(p, nullptr, shape.nranks, shape.rank, 0, shape.count, shape.chunkElems);
}

void ringAllReduceOver(Primitives& p, const std::vector<int>* members, int n, int me,
                       size_t offset, size_t count, size_t chunkElems) {
  const int r = me;
  if (n == 1) {
    p.copy(offset, offset, count);
    return;
  }
  auto rankAt = [&](int i) { return members ? (*members)[i] : i; };
  const int prev = rankAt(mod(r - 1, n));
  const int next = rankAt(mod(r + 1, n));
  const size_t roundElems = chunkElems * static_cast<size_t>(n);

  for (size_t base = offset; base < offset + count; base += roundElems) {
    const size_t len = std::min(roundElems, offset + count - base);
    auto chunk = [&](int c) { return evenPart(base, len, n, mod(c, n)); };

    // Reduce-scatter.
    Span s = chunk(r);
    p.send(next, s.offset, s.count);
    for (int k = 1; k <= n - 2; ++k) {
      s = chunk(r - k);
      p.recvReduceSend(prev, next, s.offset, s.count);
    }
    s = chunk(r + 1);
    p.recvReduceCopySend(prev, next, s.offset, s.count);

    // All-gather.
    for (int j = 1; j <= n - 2; ++j) {
      s = chunk(r + 1 - j);
      p.recvCopySend(prev, next, s.offset, s.count);
    }
    s = chunk(r + 2);
    p.recv(prev, s.offset, s.count);
  }
}

}  // namespace coil::algo
