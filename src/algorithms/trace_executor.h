// TraceExecutor: runs an algorithm without moving data and records every
// primitive call. Tests assert exact schedules with it; coil-sim prints them.
#pragma once

#include <cstdint>
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
  RecvReduce,
  Copy,
  SendRecv
};

const char* primitiveName(PrimitiveKind kind);

/// One recorded call. `from`/`to` are -1 when the primitive has no such side.
/// `offset` indexes the buffer the primitive writes (output) when it has
/// one, else the input; `inOffset` is the input offset of copy/sendRecv.
struct TraceStep {
  PrimitiveKind kind;
  int from;
  int to;
  size_t offset;
  size_t count;
  size_t inOffset = SIZE_MAX;  // only copy and sendRecv read elsewhere
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
  void recvReduce(int from, size_t offset, size_t count) override;
  void copy(size_t inOffset, size_t outOffset, size_t count) override;
  void sendRecv(int to, size_t inOffset, int from, size_t outOffset, size_t count) override;

  const std::vector<TraceStep>& steps() const { return steps_; }

 private:
  void record(PrimitiveKind k, int from, int to, size_t offset, size_t count,
              size_t inOffset = SIZE_MAX) {
    steps_.push_back({k, from, to, offset, count, inOffset});
  }
  std::vector<TraceStep> steps_;
};

}  // namespace coil::algo
