// RootedOneShotTrace: runs the rooted one-shot (rooted_oneshot_program.h)
// without a transport and records every call as a TraceStep, for the
// schedule tests and coil-sim. The exchange is recorded as the FIFO
// one-shot's own steps (FifoOneShotTrace) over the payload's elements; the
// records ride along in every message.
#pragma once

#include <vector>

#include "algorithms/fifo_oneshot_trace.h"
#include "algorithms/rooted_oneshot_program.h"

namespace coil::algo {

class RootedOneShotTrace {
 public:
  explicit RootedOneShotTrace(const RootedOneShotShape& shape) : shape_(shape) {}

  void pack(size_t at, size_t from, size_t count) {
    steps_.push_back({PrimitiveKind::PackExchange, -1, -1, at, count, from});
  }
  void exchange() {
    const FifoOneShotShape oneShot{shape_.rank, shape_.nranks,
                                   rootedPayloadElems(shape_.kind, shape_.nranks, shape_.count)};
    FifoOneShotTrace t(oneShot);
    fifoOneShotProgram(t, oneShot);
    steps_.insert(steps_.end(), t.steps().begin(), t.steps().end());
  }
  void unpack(size_t at, size_t to, size_t count) {
    steps_.push_back({PrimitiveKind::UnpackExchange, -1, -1, to, count, at});
  }
  void reduceExchange(size_t count) {
    steps_.push_back({PrimitiveKind::ReduceExchange, -1, -1, 0, count});
  }

  const std::vector<TraceStep>& steps() const { return steps_; }

 private:
  RootedOneShotShape shape_;
  std::vector<TraceStep> steps_;
};

/// The rooted one-shot run under RootedOneShotTrace (what the registry holds).
using RootedOneShotTraceProgram = void (*)(RootedOneShotTrace&, const RootedOneShotShape&);

}  // namespace coil::algo
