// The rooted one-shot: broadcast, reduce, gather and scatter in one round,
// their data riding in the call's agreement (COIL_ALGO and the tuner call
// it "oneshot", as they call the all-reduce's).
//
// A rooted call first agrees on the call (src/comm/call_agreement.cc): a
// one-shot all-reduce of one 24-byte record per rank, which every rank
// checks. Without a shared window that is a round over tcp's express
// sockets (~10 µs on loopback), and the call after it costs another round
// or more of proxy hand-offs. For small data the call travels in that same
// one-shot instead: every rank builds an exchange of
//
//   [ n records | payload ]            summed as uint64 by the FIFO one-shot
//
// where each word of the payload has one writer and zeros elsewhere (so the
// sum is exact), and takes its result out of the sum:
//
//   broadcast  payload = count         the root packs its buffer
//   scatter    payload = n × count     the root packs all n blocks; rank r takes block r
//   gather     payload = n × count     rank q packs block q; the root takes all n
//   reduce     payload = n × count     rank q packs block q; the root reduces the n
//                                      blocks in rank order, as the one-shot all-reduce
//                                      does (coilAvg divides once)
//
// Written once over a small vocabulary, run by two executors: the library's
// (src/comm/fused_rooted_call.cc: real buffers, the exchange through
// fifoOneShotAllReduce, the records checked before any result is taken) and
// RootedOneShotTrace (rooted_oneshot_trace.h), for the schedule tests and
// coil-sim. The vocabulary, in elements of the call's type:
//   pack(at, from, count)    write this rank's record, and exchange payload
//                            [at,+count) ← input [from,+count) (count 0: the
//                            record alone)
//   exchange()               the FIFO one-shot all-reduce of every rank's
//                            exchange (fifo_oneshot_program.h); afterwards the
//                            records are checked
//   unpack(at, to, count)    output [to,+count) ← exchange payload [at,+count)
//   reduceExchange(count)    output [0,+count) ← ⊕ of the payload's n blocks of
//                            count, in rank order
//
// Cost per rank (E = n·24 bytes + the payload's, n ranks; α, β, γ the FIFO
// one-shot's): α + (n-1)·E·β + (n-1)·E·γ (the sum runs over whole words),
// plus (n-1)·S·γ at the root of a reduce. One latency where the agreement
// and a chain cost two or more, for (n-1)·E bytes sent: gather, scatter and
// reduce send n²·S in all, so the tuner offers it only while (n-1) × payload
// ≤ kRootedOneShotMaxSentBytes, and only without a shared window (there the
// agreement costs under a microsecond: nothing to save).
#pragma once

#include <cstddef>

#include "algorithms/fingerprint.h"

namespace coil::algo {

/// The record a rank writes for its call (call_agreement.cc's CallRecord).
constexpr size_t kCallRecordBytes = 24;

/// The most payload one rank sends in the exchange, (n-1) × payload bytes.
/// Measured 2026-11-28 on the 2-vCPU VM over tcp (coil_perf, before and
/// after interleaved, medians of 3): with 2 ranks the rooted one-shot was
/// faster wherever it sent up to 128 KiB (broadcast 2.8x at 64 KiB; reduce
/// 1.6x at 64 KiB per rank, 128 KiB sent); with 3 ranks a reduce of 32 KiB
/// per rank (192 KiB sent) was 0.8x, which the α-β-γ model does not see
/// (the ranks' sends contend for 2 cores). 64 KiB leaves a margin.
constexpr size_t kRootedOneShotMaxSentBytes = 64 * 1024;

/// Whether a rank that sends `payloadBytes` to each of the other ranks stays
/// within kRootedOneShotMaxSentBytes (the tuner's offer, coil-sim's --measure).
inline bool rootedOneShotWithinCap(int nranks, size_t payloadBytes) {
  return static_cast<size_t>(nranks - 1) * payloadBytes <= kRootedOneShotMaxSentBytes;
}

/// One rooted one-shot, as the program sees it.
struct RootedOneShotShape {
  CollKind kind;  // broadcast, reduce, gather or scatter
  int rank;
  int nranks;
  size_t count;   // elements: the buffer (broadcast, reduce) or one block
  int root;
};

/// Elements of the exchange's payload.
inline size_t rootedPayloadElems(CollKind kind, int nranks, size_t count) {
  return kind == CollKind::Broadcast ? count : static_cast<size_t>(nranks) * count;
}

/// Bytes of the whole exchange: the records, then the payload in whole words.
inline size_t rootedExchangeBytes(int nranks, size_t payloadBytes) {
  return static_cast<size_t>(nranks) * kCallRecordBytes + (payloadBytes + 7) / 8 * 8;
}

template <class Executor>
void rootedOneShotProgram(Executor& x, const RootedOneShotShape& s) {
  const size_t n = static_cast<size_t>(s.nranks), c = s.count;
  const size_t mine = static_cast<size_t>(s.rank) * c;
  const bool root = s.rank == s.root;
  switch (s.kind) {
    case CollKind::Broadcast: x.pack(0, 0, root ? c : 0); break;
    case CollKind::Scatter: x.pack(0, 0, root ? n * c : 0); break;
    default: x.pack(mine, 0, c); break;  // gather, reduce: my block
  }
  x.exchange();
  switch (s.kind) {
    case CollKind::Broadcast: x.unpack(0, 0, c); break;
    case CollKind::Scatter: x.unpack(mine, 0, c); break;
    case CollKind::Gather:
      if (root) x.unpack(0, 0, n * c);
      break;
    default:  // reduce
      if (root) x.reduceExchange(c);
      break;
  }
}

}  // namespace coil::algo
