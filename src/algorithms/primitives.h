// The vocabulary every coil algorithm is written in.
//
// An algorithm is a per-rank program: a sequence of these calls. It never
// sees a transport. Three executors run the same program:
//   FifoExecutor       — moves real data through transport FIFOs (fifo_executor.h);
//   CallerPathExecutor — moves it over the caller-driven paths, where every
//                        peer has one (tcp's express sockets), straight from
//                        and into the caller's buffers (caller_path_executor.h);
//   TraceExecutor      — records each call, for tests and coil-sim (trace_executor.h).
//
// Offsets and counts are in elements of the call's datatype and index the
// caller's buffers: `input` (sendbuff) and `output` (recvbuff). "in" below is
// the data arriving from `from`; ⊕ is the reduction operator. A call with
// count 0 moves nothing (both ends skip it, so they stay in step).
//
//   send(to)                     to ← input[o]
//   recv(from)                   output[o] ← in
//   recvReduceSend(from,to)      to ← in ⊕ input[o]
//   recvReduceCopySend(from,to)  r = fin(in ⊕ input[o]); output[o] ← r; to ← r
//   recvCopySend(from,to)        output[o] ← in; to ← in
//   recvReduceCopy(from)         output[o] ← fin(in ⊕ input[o])
//   recvReduce(from)             output[o] ← in ⊕ input[o]        (no fin: more to come)
//   copy(i, o)                   output[o] ← fin(input[i])
//   sendRecv(to, i, from, o)     to ← input[i] while output[o] ← in, slice by slice
//                                (both directions progress together: pairwise
//                                exchanges cannot deadlock on full FIFOs)
//
// An algorithm that needs to accumulate in place (trees) runs with input and
// output pointing at the same buffer; the collective driver arranges that.
//
// fin() finishes the reduction: for coilAvg it divides by nranks, otherwise
// it is the identity. It is applied exactly once per element, on the rank
// that completes it, so all ranks receive the same bits.
#pragma once

#include <cstddef>
#include <vector>

namespace coil::algo {

class Primitives {
 public:
  virtual ~Primitives() = default;
  virtual void send(int to, size_t offset, size_t count) = 0;
  virtual void recv(int from, size_t offset, size_t count) = 0;
  virtual void recvReduceSend(int from, int to, size_t offset, size_t count) = 0;
  virtual void recvReduceCopySend(int from, int to, size_t offset, size_t count) = 0;
  virtual void recvCopySend(int from, int to, size_t offset, size_t count) = 0;
  virtual void recvReduceCopy(int from, size_t offset, size_t count) = 0;
  virtual void recvReduce(int from, size_t offset, size_t count) = 0;
  virtual void copy(size_t inOffset, size_t outOffset, size_t count) = 0;
  virtual void sendRecv(int to, size_t inOffset, int from, size_t outOffset, size_t count) = 0;
};

/// The shape of one call, as algorithms see it.
struct CallShape {
  int rank;
  int nranks;
  size_t count;       // elements
  size_t chunkElems;  // most elements one primitive call may move (> 0)
  int root = 0;       // for rooted collectives
  /// The host of each rank (dense indexes, by rank), for algorithms that
  /// follow the machine (hierarchical); null: all ranks on one host.
  const std::vector<int>* hostOf = nullptr;
};

}  // namespace coil::algo
