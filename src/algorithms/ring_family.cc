// Pipelined rings and chains for the rooted and gathering collectives.
//
// Broadcast (chain from the root):  pos = (rank - root) mod n
//   pos 0: send · pos 1..n-2: recvCopySend · pos n-1: recv        per chunk
//   T = (n-1+k-1)·(α + C·β) for k chunks of C bytes: ≈ S·β for large S.
// Reduce (chain into the root):     pos = (rank - root - 1) mod n
//   pos 0: send · pos 1..n-2: recvReduceSend · pos n-1 (root): recvReduceCopy
// All-gather (ring, input == output, own block already in place):
//   step 0: send block r · steps 1..n-2: recvCopySend block r-j · last: recv block r+1
//   T = (n-1)·α + (n-1)/n·S·β, S = total gathered bytes.
// Reduce-scatter (ring): block c starts at rank c+1 and completes at rank c
//   step 0: send block r-1 · steps 1..n-2: recvReduceSend block r-1-k ·
//   last: recvReduceCopy block r      T = (n-1)·α + (n-1)/n·S·(β+γ)
// Large blocks are cut into rounds of at most chunkElems per block, so every
// step of a round fits half the FIFO (as in ring.cc).
#include <algorithm>

#include "algorithms/chain.h"
#include "algorithms/chunking.h"
#include "algorithms/collectives.h"

namespace coil::algo {

void chainBroadcastAt(Primitives& p, const CallShape& s, int pos, int prev, int next) {
  for (size_t o = 0; o < s.count; o += s.chunkElems) {
    size_t c = std::min(s.chunkElems, s.count - o);
    if (pos == 0) p.send(next, o, c);
    else if (pos == s.nranks - 1) p.recv(prev, o, c);
    else p.recvCopySend(prev, next, o, c);
  }
}

void chainReduceAt(Primitives& p, const CallShape& s, int pos, int prev, int next) {
  for (size_t o = 0; o < s.count; o += s.chunkElems) {
    size_t c = std::min(s.chunkElems, s.count - o);
    if (pos == 0) p.send(next, o, c);
    else if (pos == s.nranks - 1) p.recvReduceCopy(prev, o, c);
    else p.recvReduceSend(prev, next, o, c);
  }
}

void ringBroadcast(Primitives& p, const CallShape& s) {
  const int n = s.nranks;
  const int pos = mod(s.rank - s.root, n);
  if (pos == 0) p.copy(0, 0, s.count);  // root: output gets the data too
  if (n == 1) return;
  chainBroadcastAt(p, s, pos, mod(s.rank - 1, n), mod(s.rank + 1, n));
}

void chainReduce(Primitives& p, const CallShape& s) {
  const int n = s.nranks;
  if (n == 1) {
    p.copy(0, 0, s.count);
    return;
  }
  chainReduceAt(p, s, mod(s.rank - s.root - 1, n), mod(s.rank - 1, n), mod(s.rank + 1, n));
}

void ringAllGather(Primitives& p, const CallShape& s) {
  const int n = s.nranks, r = s.rank;
  if (n == 1) return;
  const int prev = mod(r - 1, n), next = mod(r + 1, n);
  auto block = [&](int b) { return static_cast<size_t>(mod(b, n)) * s.count; };
  for (size_t base = 0; base < s.count; base += s.chunkElems) {
    size_t len = std::min(s.chunkElems, s.count - base);
    p.send(next, block(r) + base, len);
    for (int j = 1; j <= n - 2; ++j) p.recvCopySend(prev, next, block(r - j) + base, len);
    p.recv(prev, block(r + 1) + base, len);
  }
}

void ringReduceScatter(Primitives& p, const CallShape& s) {
  const int n = s.nranks, r = s.rank;
  auto block = [&](int b) { return static_cast<size_t>(mod(b, n)) * s.count; };
  if (n == 1) {
    p.copy(block(r), block(r), s.count);
    return;
  }
  const int prev = mod(r - 1, n), next = mod(r + 1, n);
  for (size_t base = 0; base < s.count; base += s.chunkElems) {
    size_t len = std::min(s.chunkElems, s.count - base);
    p.send(next, block(r - 1) + base, len);
    for (int k = 1; k <= n - 2; ++k) p.recvReduceSend(prev, next, block(r - 1 - k) + base, len);
    p.recvReduceCopy(prev, block(r) + base, len);
  }
}

}  // namespace coil::algo
