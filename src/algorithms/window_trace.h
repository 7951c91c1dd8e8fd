// WindowTrace: runs a window program (window_programs.h) without a window
// and records every call as a TraceStep, for the schedule tests and
// coil-sim (as TraceExecutor does for the FIFO programs).
#pragma once

#include <vector>

#include "algorithms/trace_executor.h"
#include "algorithms/window_programs.h"

namespace coil::algo {

class WindowTrace {
 public:
  /// Steps are numbered from `firstStep` (the step after the last posted).
  explicit WindowTrace(uint32_t firstStep = 1) : next_(firstStep) {}

  uint32_t nextStep() const { return next_; }
  void put(int slot, size_t in, size_t at, size_t n, bool inlined) {
    TraceStep s{PrimitiveKind::Put, -1, -1, at, n, in};
    s.slot = slot;
    s.inlined = inlined;
    steps_.push_back(s);
  }
  void post(uint32_t step, int slot) {
    TraceStep s{PrimitiveKind::Post, -1, -1, 0, 0};
    s.step = step;
    s.slot = slot;
    steps_.push_back(s);
    next_ = step + 1;
  }
  void wait(uint32_t step, size_t /*inlineElems*/) {
    TraceStep s{PrimitiveKind::Wait, -1, -1, 0, 0};
    s.step = step;
    steps_.push_back(s);
  }
  void reduceToOutput(int slot, size_t at, size_t out, size_t n, OwnTerm own, bool inlined) {
    TraceStep s{PrimitiveKind::ReduceToOutput, -1, -1, out, n, at};
    s.slot = slot;
    s.ownFromSlot = own == OwnTerm::kSlot;
    s.inlined = inlined;
    steps_.push_back(s);
  }
  void reduceToSlot(int from, size_t at, int to, size_t n, size_t in) {
    TraceStep s{PrimitiveKind::ReduceToSlot, -1, -1, at, n, in};
    s.slot = from;
    s.toSlot = to;
    steps_.push_back(s);
  }
  void copyOut(int owner, int slot, size_t at, size_t out, size_t n) {
    TraceStep s{PrimitiveKind::CopyOut, owner, -1, out, n, at};
    s.slot = slot;
    steps_.push_back(s);
  }
  void joined() {}
  void done() {}

  const std::vector<TraceStep>& steps() const { return steps_; }

 private:
  uint32_t next_;
  std::vector<TraceStep> steps_;
};

/// A window program run under WindowTrace (what the registry holds).
using WindowTraceProgram = void (*)(WindowTrace&, const WindowShape&);

}  // namespace coil::algo
