// TraceExecutor: runs an algorithm without moving data and records every
// primitive call. Tests assert exact schedules with it; coil-sim prints them.
#pragma once

#include <string>
#include <vector>

#include "algorithms/primitives.h"

namespace coil::algo {

enum class PrimitiveKind {
  Send,
  Recv,
  RecvReduceSend,
  RecvReduceCopySend,
  RecvCopySend,
  RecvReduceCopy,
  Copy
};

const char* primitiveName(PrimitiveKind kind);

/// One recorded call. `from`/`to` are -1 when the primitive has no such side.
struct TraceStep {
  PrimitiveKind kind;
  int from;
  int to;
  size_t offset;
  size_t count;
  bool operator==(const TraceStep&) const = default;
};

/// "recvReduceSend 2->0->1 [4,+2)"
std::string describe(const TraceStep& step, int rank);

class TraceExecutor final : public Primitives {
 public:
  void send(int to, size_t offset, size_t count) override;
  void recv(int from, size_t offset, size_t count) override;
  void recvReduceSend(int from, int to, size_t offset, size_t count) override;
  void recvReduceCopySend(int from, int to, size_t offset, size_t count) override;
  void recvCopySend(int from, int to, size_t offset, size_t count) override;
  void recvReduceCopy(int from, size_t offset, size_t count) override;
  void copy(size_t offset, size_t count) override;

  const std::vector<TraceStep>& steps() const { return steps_; }

 private:
  void record(PrimitiveKind k, int from, int to, size_t offset, size_t count) {
    steps_.push_back({k, from, to, offset, count});
  }
  std::vector<TraceStep> steps_;
};

}  // namespace coil::algo
