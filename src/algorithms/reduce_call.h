// One all-reduce call, as the direct (non-Primitives) algorithms see it:
// the one-shot and slice algorithms of window_allreduce.h and the one-shot
// over FIFOs of fifo_oneshot.h. Unlike CallData (fifo_executor.h), the text
// describing the call is built only when an error message needs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "coil.h"

namespace coil::algo {

struct ReduceCall {
  const void* input;
  void* output;  // may equal input (in place)
  size_t count;  // elements
  coilDataType_t type;
  coilRedOp_t op;  // coilAvg: summed, then divided once by nranks
  uint64_t tag;    // the call's fingerprint (fingerprint.h)
  /// "allreduce #12 (1024 x float32, sum)": called only to build an error message.
  const std::function<std::string()>* describe;
};

}  // namespace coil::algo
