// The shape of coil's binary trees, and what it costs each rank.
//
// Shape: a heap over positions (children of position p: 2p+1, 2p+2). Ranks
// map to positions so that the tree's root is position 0:
//   tree 0: position = rank - root (mod n)      tree 1: position = n-1-rank
// The double binary tree all-reduce (tree.cc) runs half the buffer through
// each of tree 0 (root 0) and tree 1. A leaf of tree 0 is interior in tree 1.
//
// Header-only and free of other coil headers: the algorithm (tree.cc), the
// cost model (tune/tuner.cc) and coil_perf's --predict all read the same shape.
#pragma once

#include <algorithm>
#include <cmath>

namespace coil::algo {

struct TreeNode {
  int parent = -1;
  int child[2] = {-1, -1};
  int children() const { return (child[0] >= 0) + (child[1] >= 0); }
};

/// `rank`'s node in tree `tree` (0 or 1) of `n` ranks; `root` applies to tree 0.
inline TreeNode treeNode(int tree, int rank, int n, int root) {
  auto wrap = [n](int a) { return ((a % n) + n) % n; };
  auto toPos = [&](int r) { return tree == 0 ? wrap(r - root) : n - 1 - r; };
  auto toRank = [&](int q) { return tree == 0 ? wrap(q + root) : n - 1 - q; };
  TreeNode node;
  const int pos = toPos(rank);
  if (pos > 0) node.parent = toRank((pos - 1) / 2);
  for (int k = 0; k < 2; ++k)
    if (2 * pos + 1 + k < n) node.child[k] = toRank(2 * pos + 1 + k);
  return node;
}

/// The busiest rank of a double-binary-tree all-reduce of S bytes, in units
/// of S. Every tree edge carries its half (S/2) once up and once down, so a
/// rank sends S/2 per edge it has in each tree (and receives as much), and
/// reduces S/2 per child. A rank interior in one tree and a leaf in the other
/// sends 2S; with n = 2 each rank has one edge per tree: S, as in the ring.
struct TreeLoad {
  double sentPerByte = 0;     // bytes sent (= received) by the busiest rank, / S
  double reducedPerByte = 0;  // bytes reduced by the busiest rank, / S
  int depth = 0;              // levels below the root: ceil(log2(n + 1)) - 1
};

inline TreeLoad doubleTreeLoad(int n) {
  TreeLoad load;
  if (n < 2) return load;
  for (int r = 0; r < n; ++r) {
    double edges = 0, children = 0;
    for (int t = 0; t < 2; ++t) {
      const TreeNode node = treeNode(t, r, n, 0);
      edges += node.children() + (node.parent >= 0 ? 1 : 0);
      children += node.children();
    }
    load.sentPerByte = std::max(load.sentPerByte, edges / 2);
    load.reducedPerByte = std::max(load.reducedPerByte, children / 2);
  }
  load.depth = static_cast<int>(std::ceil(std::log2(n + 1.0))) - 1;
  return load;
}

}  // namespace coil::algo
