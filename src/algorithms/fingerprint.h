// The fingerprint every slot carries, so mismatched programs fail loudly.
//
// If rank 3 calls all-reduce with a different count, dtype or op than rank 0,
// or ranks issue collectives in a different order, the first slot that
// crosses between them carries a fingerprint the receiver does not expect.
// The receiver then fails the call with a message naming both calls instead
// of reducing garbage or waiting forever.
//
//   bits 63..40  sequence number of the call on this communicator (24 bits)
//   bits 39..36  collective kind
//   bits 35..32  datatype
//   bits 31..28  reduction op
//   bits 27..0   hash of the element count (and root, where there is one)
#pragma once

#include <cstdint>
#include <string>

#include "coil.h"

namespace coil::algo {

enum class CollKind : uint8_t {
  AllReduce = 1,
  Broadcast = 2,
  Reduce = 3,
  AllGather = 4,
  ReduceScatter = 5,
  AllToAll = 6,
  Gather = 7,
  Scatter = 8,
  SendRecv = 9,
  Barrier = 10,
  // Not a call: the last slot a rank sends when its communicator fails,
  // carrying the error's text (failure_notice.h).
  FailureNotice = 15,
};

const char* collName(CollKind kind);

/// True for the collectives whose op matters (all-reduce, reduce, reduce-scatter).
inline bool reduces(CollKind kind) {
  return kind == CollKind::AllReduce || kind == CollKind::Reduce ||
         kind == CollKind::ReduceScatter;
}

/// True for the collectives with a root (broadcast, reduce, gather, scatter).
inline bool hasRoot(CollKind kind) {
  return kind == CollKind::Broadcast || kind == CollKind::Reduce || kind == CollKind::Gather ||
         kind == CollKind::Scatter;
}

struct Fingerprint {
  uint32_t seq;
  CollKind coll;
  coilDataType_t type;
  coilRedOp_t op;
  uint64_t count;

  uint64_t encode() const;
};

/// The fingerprint of collective call number `seq`: the op only where the
/// collective reduces, the root folded into the count's hash, so ranks that
/// disagree on either fail loudly.
inline uint64_t callTag(uint32_t seq, CollKind kind, coilDataType_t type, coilRedOp_t op,
                        uint64_t count, int root) {
  return Fingerprint{seq, kind, type, reduces(kind) ? op : coilSum,
                     count ^ (static_cast<uint64_t>(root) << 48)}
      .encode();
}

/// The fields of an encoded fingerprint that survive whole.
inline uint32_t seqOf(uint64_t tag) { return static_cast<uint32_t>(tag >> 40) & 0xFFFFFFu; }
inline CollKind kindOf(uint64_t tag) { return static_cast<CollKind>((tag >> 36) & 0xF); }
/// `a` - `b` of two 24-bit sequence numbers, wrapping (negative: a is older).
inline int32_t seqDistance(uint32_t a, uint32_t b) {
  return static_cast<int32_t>((a - b) << 8) >> 8;
}

/// Human text for a mismatch between what arrived and what was expected.
std::string explainMismatch(uint64_t got, uint64_t expected);

}  // namespace coil::algo
