// Binary trees: latency grows with log2(n) instead of n.
//
// Shape (tree_shape.h): a heap over positions. Double binary tree
// all-reduce: each half of the buffer has its own tree,
//   tree 0: position = rank            tree 1: position = n-1-rank
// A leaf of tree 0 (upper half of positions) is interior in tree 1, so both
// trees together keep every rank's links busy in both directions.
// Per chunk, each tree reduces up to its root and broadcasts back down:
//
//   role      up (reduce)                               down (broadcast)
//   leaf      send(parent)                              recv(parent)
//   interior  recvReduce(c1); recvReduceSend(c2,parent)  recvCopySend(parent,c1); send(c2)
//             (one child: recvReduceSend(c1,parent))
//   root      recvReduce(c1); recvReduceCopy(c2)         send(c1); send(c2)
//
// Pipelining: the up pass of chunk i runs before the down pass of chunk i-1,
// so chunks stream through the tree in both directions at once.
//   T ≈ (2·depth + chunks)·α + L·S·β + R·S·γ, with L and R the busiest
// rank's load (doubleTreeLoad: L = 2, R = 1 for large n; L = 1, R = 1/2 for
// n = 2, as the ring): the ring's bandwidth term, a logarithmic latency term.
// The algorithm accumulates in place: the driver runs it with input ==
// output (copying sendbuff to recvbuff first when out-of-place).
// Every chunk is reduced in a fixed order on fixed ranks and then copied
// down, so all ranks get the same bits.
#include <algorithm>

#include "algorithms/chunking.h"
#include "algorithms/collectives.h"
#include "algorithms/tree_shape.h"

namespace coil::algo {
namespace {

void up(Primitives& p, const TreeNode& node, size_t o, size_t c) {
  const int c1 = node.child[0], c2 = node.child[1];
  if (node.parent < 0) {  // root
    if (c2 >= 0) {
      p.recvReduce(c1, o, c);
      p.recvReduceCopy(c2, o, c);
    } else if (c1 >= 0) {
      p.recvReduceCopy(c1, o, c);
    } else {
      p.copy(o, o, c);  // single rank: finish (avg) in place
    }
    return;
  }
  if (c1 < 0) p.send(node.parent, o, c);
  else if (c2 < 0) p.recvReduceSend(c1, node.parent, o, c);
  else {
    p.recvReduce(c1, o, c);
    p.recvReduceSend(c2, node.parent, o, c);
  }
}

void down(Primitives& p, const TreeNode& node, size_t o, size_t c) {
  const int c1 = node.child[0], c2 = node.child[1];
  if (node.parent < 0) {
    if (c1 >= 0) p.send(c1, o, c);
  } else if (c1 >= 0) {
    p.recvCopySend(node.parent, c1, o, c);
  } else {
    p.recv(node.parent, o, c);
  }
  if (c2 >= 0) p.send(c2, o, c);
}

}  // namespace

void doubleTreeAllReduce(Primitives& p, const CallShape& s) {
  const int n = s.nranks;
  const size_t half = s.count / 2;
  const Span part[2] = {{0, half}, {half, s.count - half}};
  const TreeNode node[2] = {treeNode(0, s.rank, n, 0), treeNode(1, s.rank, n, 0)};
  auto chunks = [&](int t) { return (part[t].count + s.chunkElems - 1) / s.chunkElems; };
  auto piece = [&](int t, size_t i) {
    size_t o = part[t].offset + i * s.chunkElems;
    return Span{o, std::min(s.chunkElems, part[t].offset + part[t].count - o)};
  };
  const size_t rounds = std::max(chunks(0), chunks(1));
  for (size_t i = 0; i <= rounds; ++i) {
    for (int t = 0; t < 2; ++t)
      if (i < chunks(t)) up(p, node[t], piece(t, i).offset, piece(t, i).count);
    for (int t = 0; t < 2; ++t)
      if (i >= 1 && i - 1 < chunks(t)) down(p, node[t], piece(t, i - 1).offset, piece(t, i - 1).count);
  }
}

// Tree reduce: the up pass of one tree rooted at `root`, chunk by chunk.
// log-depth latency; the busiest rank receives and reduces two children's
// data, so for large messages the chain (ring_family.cc) moves less per rank.
void treeReduce(Primitives& p, const CallShape& s) {
  const TreeNode node = treeNode(0, s.rank, s.nranks, s.root);
  for (size_t o = 0; o < s.count; o += s.chunkElems) up(p, node, o, std::min(s.chunkElems, s.count - o));
}

void treeBroadcast(Primitives& p, const CallShape& s) {
  const TreeNode node = treeNode(0, s.rank, s.nranks, s.root);
  if (s.rank == s.root) p.copy(0, 0, s.count);
  if (s.nranks == 1) return;
  for (size_t o = 0; o < s.count; o += s.chunkElems)
    down(p, node, o, std::min(s.chunkElems, s.count - o));
}

}  // namespace coil::algo
