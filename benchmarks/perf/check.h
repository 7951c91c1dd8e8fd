// Result checking: every rank fills its input with small integers chosen so
// that the exact all-reduce result is representable in every type (fp16 and
// bf16 included) no matter in which order the ranks are combined; the
// checker recomputes that result independently and compares bit for bit.
//
// Value rules (n = number of ranks, i = element index, h = hash(i, rank)):
//   sum/max/min/avg: v in [0, R) for unsigned types, [-R/2, R/2) otherwise,
//                    with R = clamp(254 / n, 2, 16), so |sum| <= 127 and
//                    every partial sum is exact in int8/uint8/bf16/fp16.
//                    (Beyond 127 ranks integer sums wrap, which the checker
//                    reproduces; fp16/bf16 stay exact up to 256 ranks.)
//   prod:            v in {1, 2} (2 only on ranks 0..5), negated on some
//                    elements for signed and floating types: |prod| <= 64.
//   avg:             sum / n; integers truncate toward zero (C division),
//                    floating types round the exact quotient to nearest even.
//   copies:          (broadcast, all-gather, all-to-all, gather, scatter,
//                    send/recv) one of 128 integers per element, [0, 128)
//                    unsigned, [-64, 64) otherwise: exact in every type,
//                    chosen by hashing (source rank, element index).
// The hash makes neighbouring elements differ, so a chunk written to the
// wrong offset is caught. `offset` shifts the element index, so that block
// b of a buffer can be produced or checked on its own (index = offset + i).
#pragma once

#include <cstddef>
#include <cstdint>

#include "dtypes.h"

namespace coil_perf {

/// The mismatches in one result buffer.
struct WrongReport {
  size_t count = 0;       ///< elements whose bits differ from the expected ones
  size_t firstIndex = 0;  ///< index of the first of them (valid if count > 0)
  uint64_t firstGot = 0;  ///< its bits (low `size` bytes)
  uint64_t firstExpected = 0;
};

/// Writes rank `rank`'s input (of a run with `nranks` ranks) for reduction
/// `op` into the `count` elements of `type` at `buf` (elements offset ..
/// offset + count - 1 of the input).
void fillInput(void* buf, size_t count, const TypeInfo& type, coilRedOp_t op, int rank,
               int nranks, size_t offset = 0);

/// Fills `count` elements with a value that no correct result of
/// fillInput's inputs takes (NaN for floating types, the most negative or
/// largest integer otherwise), so a result that was never written is caught.
void poison(void* buf, size_t count, const TypeInfo& type);

/// Compares the `count` elements at `result` with the all-reduce (`op`) of
/// the inputs of all `nranks` ranks (elements offset .. offset + count - 1),
/// recomputed here. firstIndex counts from `result`.
WrongReport countWrong(const void* result, size_t count, const TypeInfo& type, coilRedOp_t op,
                       int nranks, size_t offset = 0);

/// Writes rank `rank`'s data for the copying collectives (elements offset ..
/// offset + count - 1) into the `count` elements at `buf`.
void fillCopyInput(void* buf, size_t count, const TypeInfo& type, int rank, size_t offset);

/// Compares the `count` elements at `result` with what
/// fillCopyInput(rank = sourceRank, offset) writes. firstIndex counts from `result`.
WrongReport countWrongCopy(const void* result, size_t count, const TypeInfo& type, int sourceRank,
                           size_t offset);

/// Adds `part` (whose firstIndex counts from element `base`) to `total`.
void mergeWrong(WrongReport& total, const WrongReport& part, size_t base);

/// fp32 -> IEEE binary16 bits, round to nearest even (exposed for tests).
uint16_t floatToHalfBits(float value);
/// fp32 -> bfloat16 bits, round to nearest even.
uint16_t floatToBf16Bits(float value);

}  // namespace coil_perf
