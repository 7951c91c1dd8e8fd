// FifoOneShotTrace: runs the FIFO one-shot program (fifo_oneshot_program.h)
// without a transport and records every call as a TraceStep, for the
// schedule tests and coil-sim (as TraceExecutor does for the Primitives
// programs and WindowTrace for the window programs).
#pragma once

#include <vector>

#include "algorithms/fifo_oneshot_program.h"
#include "algorithms/trace_executor.h"

namespace coil::algo {

class FifoOneShotTrace {
 public:
  explicit FifoOneShotTrace(const FifoOneShotShape& shape) : count_(shape.count) {}

  void send(int to) { steps_.push_back({PrimitiveKind::Send, -1, to, 0, count_}); }
  void recvBlock(int from) { steps_.push_back({PrimitiveKind::RecvBlock, from, -1, 0, count_}); }
  void waitAll() { steps_.push_back({PrimitiveKind::WaitAll, -1, -1, 0, count_}); }
  void reduceBlocks() { steps_.push_back({PrimitiveKind::ReduceBlocks, -1, -1, 0, count_}); }
  void done() {}

  const std::vector<TraceStep>& steps() const { return steps_; }

 private:
  size_t count_;
  std::vector<TraceStep> steps_;
};

/// The FIFO one-shot program run under FifoOneShotTrace (what the registry holds).
using FifoOneShotTraceProgram = void (*)(FifoOneShotTrace&, const FifoOneShotShape&);

}  // namespace coil::algo
