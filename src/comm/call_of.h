// From what the API received to the call value (algorithms/call.h): the one
// place a call's element count becomes bytes. The collective driver runs
// the value it returns; coilGroupSimulateEnd's estimate and coil-sim ask the
// cost model about the same bytes.
#pragma once

#include "algorithms/call.h"
#include "comm/communicator.h"
#include "reduce/reduce.h"

namespace coil {

/// The call with the caller's buffers used as they are. The driver adds
/// what depends on the communicator and the chosen algorithm: slice and
/// chunk, fingerprint, how to wait, the description, and the buffers a
/// pre-multiplied sum or the program's layout substitutes.
inline algo::Call callOf(const CollectiveCall& c) {
  const size_t elementBytes = reduce::typeSize(c.type);
  return algo::Call{.kind = c.kind,
                    .sendbuff = c.sendbuff,
                    .recvbuff = c.recvbuff,
                    .input = c.sendbuff,
                    .output = c.recvbuff,
                    .count = c.count,
                    .elementBytes = elementBytes,
                    .bytes = c.count * elementBytes,
                    .type = c.type,
                    .op = c.op,
                    .reduceOp = c.op,
                    .root = c.root};
}

}  // namespace coil
