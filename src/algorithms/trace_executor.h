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
  SendRecv,
  // The FIFO one-shot's vocabulary (fifo_oneshot_program.h), with Send
  // (which starts sending the whole input [offset,+count) to `to`).
  RecvBlock,     // start receiving rank `from`'s input [offset,+count) into block `from`
  WaitAll,       // until every started send has left and every started receive arrived
  ReduceBlocks,  // output [offset,+count) ← ⊕ of blocks 0 … n-1 in rank order,
                 // this rank's own term from its input
  // The rooted one-shot's (rooted_oneshot_program.h), around the FIFO
  // one-shot's steps, which there send, receive and reduce the exchange.
  PackExchange,    // my record, and exchange [offset,+count) ← input [inOffset,+count)
  UnpackExchange,  // output [offset,+count) ← exchange [inOffset,+count)
  ReduceExchange,  // output [offset,+count) ← ⊕ of the exchange's n blocks of count
  // The window programs' vocabulary (window_programs.h, window_trace.h).
  Put,             // my slot `slot` [offset,+count) ← input [inOffset, …)
  Post,            // publish `step` (my slot `slot` stamped)
  Wait,            // until every rank has posted `step`
  ReduceToOutput,  // output [offset,+count) ← ⊕ of every rank's slot `slot` [inOffset, …)
  ReduceToSlot,    // my slot `toSlot` [offset,+count) ← ⊕ of every rank's slot `slot` [offset, …),
                   // own term from input [inOffset, …)
  CopyOut          // output [offset,+count) ← rank `from`'s slot `slot` [inOffset, …)
};

const char* primitiveName(PrimitiveKind kind);

/// One recorded call. `from`/`to` are -1 when the primitive has no such side.
/// `offset` indexes the buffer the primitive writes (output) when it has
/// one, else the input; `inOffset` is the input offset of copy/sendRecv
/// (for the window kinds: where they read, see PrimitiveKind).
struct TraceStep {
  PrimitiveKind kind;
  int from;
  int to;
  size_t offset;
  size_t count;
  size_t inOffset = SIZE_MAX;  // only copy and sendRecv read elsewhere
  // The window kinds only:
  int slot = -1;              // the slot read (or written by put, posted by post)
  int toSlot = -1;            // reduceToSlot: the slot written
  uint32_t step = 0;          // post, wait
  bool ownFromSlot = false;   // reduceToOutput: this rank's term from its slot, not its input
  bool inlined = false;       // put, reduceToOutput: through the slot's inline lines
  bool operator==(const TraceStep&) const = default;
};

/// True for the window kinds (Put … CopyOut).
inline bool isWindowKind(PrimitiveKind k) { return k >= PrimitiveKind::Put; }

/// True for the FIFO one-shot's own kinds (RecvBlock … ReduceBlocks) and
/// the rooted one-shot's (PackExchange … ReduceExchange).
inline bool isFifoOneShotKind(PrimitiveKind k) {
  return k >= PrimitiveKind::RecvBlock && k <= PrimitiveKind::ReduceExchange;
}

/// True for the rooted one-shot's own kinds (PackExchange … ReduceExchange).
inline bool isExchangeKind(PrimitiveKind k) {
  return k >= PrimitiveKind::PackExchange && k <= PrimitiveKind::ReduceExchange;
}

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
