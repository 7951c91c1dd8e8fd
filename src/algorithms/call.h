// One collective call, as everything below the API sees it.
//
// The collective driver (src/comm/collective_driver.cc) builds it once per
// call and hands it down by const reference: the FIFO executor, the window
// algorithms and the one-shot over FIFOs all read the same value. So the
// element count becomes bytes once, the fingerprint is stamped once, and a
// change to what a call carries is made in one place.
//
// The per-rank programs do not see it: they are pure scheduling and also
// run in the trace executor and coil-sim, with no buffers at all. They see
// its shape (shapeOf), derived from it, never re-derived from the API's
// arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/fingerprint.h"
#include "algorithms/primitives.h"
#include "coil.h"
#include "transports/slot_fifo.h"

namespace coil::algo {

struct Call {
  CollKind kind;
  // The caller's buffers, as the API received them.
  const void* sendbuff;
  void* recvbuff;
  // The buffers the algorithm reads and writes: the caller's, a scaled copy
  // of the input (pre-multiplied sum), or what the program's layout asks
  // for (registry.h: in place, scratch).
  const void* input;
  void* output;
  size_t outputOrigin = 0;  // the element output[0] stands for (reduce-scatter's own block)
  size_t count;             // elements of one block, as the API counts them
  size_t elementBytes;      // of the datatype
  size_t bytes;             // count × elementBytes: one block
  coilDataType_t type;
  // The fingerprint and the messages name the op the caller passed (a
  // pre-multiplied sum's handle); the kernels apply reduceOp (coilSum for a
  // pre-multiplied sum, whose input is already scaled; coilAvg sums, then
  // divides once by nranks).
  coilRedOp_t op;
  coilRedOp_t reduceOp;
  int root;                 // 0 for collectives without a root
  uint64_t tag = 0;         // the fingerprint every slot and window step carries
  size_t sliceElems = 0;    // elements in one FIFO slot
  size_t chunkElems = 0;    // most elements one primitive call may move
  transport::WaitWatch watch{};  // deadline, abort flag, polling, stall probe
  /// "allreduce #12 (1024 x float32, sum)". Held by pointer and called only
  /// for a message: building the text would cost more than a small call.
  const std::function<std::string()>* describe = nullptr;

  std::string description() const { return (*describe)(); }
};

/// The call as a per-rank program sees it.
inline CallShape shapeOf(const Call& call, int rank, int nranks,
                         const std::vector<int>* hostOf = nullptr) {
  return CallShape{rank, nranks, call.count, call.chunkElems, call.root, hostOf};
}

}  // namespace coil::algo
