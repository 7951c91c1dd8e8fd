#include "harness/collective_reference.h"

#include <algorithm>
#include <sstream>

#include "harness/reference.h"

namespace coil::test {
namespace {

using algo::CollKind;

bool perRankBlocksIn(CollKind k) {
  return k == CollKind::ReduceScatter || k == CollKind::AllToAll || k == CollKind::Scatter;
}
bool perRankBlocksOut(CollKind k) {
  return k == CollKind::AllGather || k == CollKind::AllToAll || k == CollKind::Gather;
}

// Element i of rank r's input for the collectives that move data: distinct
// per rank and element, and exact in every type (below 256: bf16 holds it).
int64_t movedValue(int r, size_t i) {
  return static_cast<int64_t>((static_cast<size_t>(r) * 37 + i * 5 + i / 251) % 251);
}

std::vector<uint8_t> moved(coilDataType_t t, int r, size_t from, size_t count) {
  std::vector<uint8_t> buf(count * sizeOf(t));
  for (size_t i = 0; i < count; ++i) storeInt(t, buf.data(), i, movedValue(r, from + i));
  return buf;
}

// The elements [skip, skip + keep) of a buffer of `es`-byte elements.
std::vector<uint8_t> elementRange(std::vector<uint8_t> all, size_t skip, size_t keep, size_t es) {
  all.erase(all.begin(), all.begin() + static_cast<ptrdiff_t>(skip * es));
  all.resize(keep * es);
  return all;
}

void append(std::vector<uint8_t>* to, const std::vector<uint8_t>& from, size_t bytes) {
  to->insert(to->end(), from.begin(), from.begin() + static_cast<ptrdiff_t>(bytes));
}

}  // namespace

std::string describe(const CollectiveCase& c) {
  std::ostringstream s;
  s << algo::collName(c.kind) << " " << nameOf(c.type);
  if (algo::reduces(c.kind)) s << " " << nameOf(c.op);
  s << " count " << c.count;
  if (algo::hasRoot(c.kind))
    s << " root " << c.root;
  if (c.inPlace) s << " in place";
  if (c.salt != 0) s << " salt " << c.salt;
  return s.str();
}

size_t inputElems(const CollectiveCase& c, int n) {
  return c.count * (perRankBlocksIn(c.kind) ? static_cast<size_t>(n) : 1);
}

size_t outputElems(const CollectiveCase& c, int n) {
  return c.count * (perRankBlocksOut(c.kind) ? static_cast<size_t>(n) : 1);
}

std::vector<uint8_t> collectiveInput(const CollectiveCase& c, int rank, int n) {
  const size_t elems = inputElems(c, n);
  if (algo::reduces(c.kind))  // (makeInput pads a byte, which elementRange drops)
    return elementRange(makeInput(c.type, c.op, rank, n, c.salt + elems), c.salt, elems,
                        sizeOf(c.type));
  return moved(c.type, rank, c.salt, elems);
}

std::vector<uint8_t> collectiveExpected(const CollectiveCase& c, int rank, int n) {
  const size_t es = sizeOf(c.type), block = c.count * es;
  std::vector<uint8_t> out;
  switch (c.kind) {
    case CollKind::AllReduce:
    case CollKind::Reduce:
      if (c.kind == CollKind::Reduce && rank != c.root) return {};
      out = elementRange(makeExpected(c.type, c.op, n, c.salt + c.count), c.salt, c.count, es);
      break;
    case CollKind::ReduceScatter: {
      const std::vector<uint8_t> all = elementRange(
          makeExpected(c.type, c.op, n, c.salt + c.count * n), c.salt, c.count * n, es);
      out.assign(all.begin() + static_cast<ptrdiff_t>(rank * block),
                 all.begin() + static_cast<ptrdiff_t>((rank + 1) * block));
      break;
    }
    case CollKind::Broadcast: out = moved(c.type, c.root, c.salt, c.count); break;
    case CollKind::Gather:
      if (rank != c.root) return {};
      [[fallthrough]];
    case CollKind::AllGather:
      for (int q = 0; q < n; ++q) append(&out, moved(c.type, q, c.salt, c.count), block);
      break;
    case CollKind::AllToAll:  // block q of mine is block `rank` of rank q's input
      for (int q = 0; q < n; ++q)
        append(&out, moved(c.type, q, c.salt + static_cast<size_t>(rank) * c.count, c.count),
               block);
      break;
    case CollKind::Scatter:
      out = moved(c.type, c.root, c.salt + static_cast<size_t>(rank) * c.count, c.count);
      break;
    default: break;
  }
  out.resize(outputElems(c, n) * es);
  return out;
}

bool inputInsideOutput(const CollectiveCase& c) {
  return c.kind == CollKind::AllGather || c.kind == CollKind::Gather;
}

size_t inPlaceOffsetElems(const CollectiveCase& c, int rank) {
  switch (c.kind) {
    case CollKind::AllGather:
    case CollKind::ReduceScatter: return static_cast<size_t>(rank) * c.count;
    case CollKind::Gather:
    case CollKind::Scatter: return static_cast<size_t>(c.root) * c.count;
    default: return 0;
  }
}

PlacedCall placeCall(const CollectiveCase& c, int rank, int n, uint8_t* send, uint8_t* recv) {
  const size_t es = sizeOf(c.type);
  const std::vector<uint8_t> in = collectiveInput(c, rank, n);
  std::fill_n(recv, outputElems(c, n) * es, uint8_t{0xA5});
  const bool rooted = c.kind == CollKind::Reduce || c.kind == CollKind::Gather ||
                      c.kind == CollKind::Scatter;
  const bool inPlace = c.inPlace && (!rooted || rank == c.root);
  if (!inPlace) {
    std::copy(in.begin(), in.end(), send);
    return {send, recv};
  }
  const size_t at = inPlaceOffsetElems(c, rank) * es;
  if (inputInsideOutput(c)) {
    std::copy(in.begin(), in.end(), recv + at);
    return {recv + at, recv};
  }
  std::copy(in.begin(), in.end(), send);
  return {send, send + at};
}

}  // namespace coil::test
