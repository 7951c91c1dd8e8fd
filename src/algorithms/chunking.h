// Pure arithmetic: how a buffer is cut into rounds and chunks.
//
// A ring moves nranks chunks per round; a round covers at most
// nranks * chunkElems elements. Within a round the elements are split as
// evenly as possible: the first (len % n) chunks get one extra element. So
// every count works, including count < nranks (some chunks are empty).
#pragma once

#include <algorithm>
#include <cstddef>

namespace coil::algo {

struct Span {
  size_t offset;
  size_t count;
};

/// Chunk `c` (0 <= c < parts) of [base, base + len) split into `parts`.
inline Span evenPart(size_t base, size_t len, int parts, int c) {
  size_t q = len / static_cast<size_t>(parts);
  size_t rem = len % static_cast<size_t>(parts);
  size_t uc = static_cast<size_t>(c);
  return {base + uc * q + std::min(uc, rem), q + (uc < rem ? 1 : 0)};
}

/// ((a % n) + n) % n for possibly negative a.
inline int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace coil::algo
