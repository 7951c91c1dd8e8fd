// Collectives where every pair exchanges one block directly.
//
// All-to-all (pairwise exchange): in step k = 1..n-1 rank r sends its block
// for r+k and receives the block from r-k, both at once (sendRecv), so every
// rank is busy with exactly one partner per direction in every step.
//   T = (n-1)·(α + B·β) for blocks of B bytes.
// Gather / scatter: the root receives / sends one block per rank, in rank
// order; the other ranks make a single send / recv.
//   T = (n-1)·(α + B·β) at the root, which is the bottleneck.
#include "algorithms/chunking.h"
#include "algorithms/collectives.h"

namespace coil::algo {

void pairwiseAllToAll(Primitives& p, const CallShape& s) {
  const int n = s.nranks, r = s.rank;
  auto block = [&](int b) { return static_cast<size_t>(b) * s.count; };
  p.copy(block(r), block(r), s.count);
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    p.sendRecv(to, block(to), from, block(from), s.count);
  }
}

void directGather(Primitives& p, const CallShape& s) {
  const int n = s.nranks;
  if (s.rank != s.root) {
    p.send(s.root, 0, s.count);
    return;
  }
  for (int q = 0; q < n; ++q) {
    size_t at = static_cast<size_t>(q) * s.count;
    if (q == s.root) p.copy(0, at, s.count);
    else p.recv(q, at, s.count);
  }
}

void directScatter(Primitives& p, const CallShape& s) {
  const int n = s.nranks;
  if (s.rank != s.root) {
    p.recv(s.root, 0, s.count);
    return;
  }
  for (int q = 0; q < n; ++q) {
    size_t at = static_cast<size_t>(q) * s.count;
    if (q == s.root) p.copy(at, 0, s.count);
    else p.send(q, at, s.count);
  }
}

}  // namespace coil::algo
