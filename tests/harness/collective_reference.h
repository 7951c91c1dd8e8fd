// Independent reference for every collective but the barrier: what each
// rank passes in, and what its output must hold after the call, built from
// reference.h's values (reductions) and a per-(rank, element) pattern
// (collectives that move data), in plain loops over the definitions of the
// collectives, as NCCL documents them. Shared by the tests that run every
// collective over one path (device windows, the fake GPU).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/fingerprint.h"
#include "coil.h"

namespace coil::test {

struct CollectiveCase {
  algo::CollKind kind;
  coilDataType_t type;
  coilRedOp_t op;  // where the collective reduces
  size_t count;    // as the C API's: per rank's block where there are blocks
  int root;        // where there is one
  bool inPlace;    // as NCCL defines in place for the collective
  // Shifts every value pattern by this many elements (below 251), so that
  // calls of one shape can carry different data: an output left over from
  // an earlier call then cannot pass for this one's.
  uint32_t salt = 0;
};

/// "allgather int32 count 7 root 1 in place", for messages.
std::string describe(const CollectiveCase& c);

/// Elements of a rank's input and output buffers for the call.
size_t inputElems(const CollectiveCase& c, int nranks);
size_t outputElems(const CollectiveCase& c, int nranks);

/// Rank `rank`'s input (inputElems elements; meaningless where the rank's
/// input is unused, as a non-root's of broadcast or scatter).
std::vector<uint8_t> collectiveInput(const CollectiveCase& c, int rank, int nranks);

/// What rank `rank`'s output holds after the call (outputElems elements);
/// empty where it is unspecified (a non-root's of reduce and gather).
std::vector<uint8_t> collectiveExpected(const CollectiveCase& c, int rank, int nranks);

/// The buffers rank `rank` passes: its input written where the call reads
/// it, in `send` or (in place) inside `recv`, or `send` holding the output
/// too. `send` and `recv` hold inputElems and outputElems elements and are
/// host-writable (host memory, or the fake GPU's); `recv` is filled with
/// 0xA5 first, so unwritten output shows. In place applies to every rank
/// of all-reduce, broadcast, all-gather and reduce-scatter, to the root of
/// reduce, gather and scatter.
struct PlacedCall {
  const void* send;
  void* recv;  // where the output lands: compare it with collectiveExpected
};
PlacedCall placeCall(const CollectiveCase& c, int rank, int nranks, uint8_t* send, uint8_t* recv);

/// Where, in elements of its output buffer, an in-place call's input sits
/// (all-gather: block rank; gather: block root at the root), or where an
/// in-place call's output sits in its input buffer (reduce-scatter: block
/// rank; scatter: block root at the root); 0 for the others, whose in-place
/// input and output are one buffer.
size_t inPlaceOffsetElems(const CollectiveCase& c, int rank);

/// True where the rank's input is one with its output's block
/// (inPlaceOffsetElems) rather than the output itself.
bool inputInsideOutput(const CollectiveCase& c);

}  // namespace coil::test
