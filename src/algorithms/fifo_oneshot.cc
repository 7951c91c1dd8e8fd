#include "algorithms/fifo_oneshot.h"

#include <sched.h>

#include <cstring>

#include "algorithms/failure_notice.h"
#include "algorithms/fingerprint.h"
#include "core/error.h"
#include "core/rank_list.h"
#include "reduce/reduce.h"
#include "transports/caller_io.h"

namespace coil::algo {
namespace {

using transport::WaitFailure;

[[noreturn]] void failWait(const ReduceCall& call, const transport::WaitWatch& watch,
                           transport::Connection& c, WaitFailure why, const char* direction) {
  switch (why) {
    case WaitFailure::Timeout:
      fail(coilTimeout, (*call.describe)(), ": timed out after ", watch.deadline.totalMs(),
           " ms waiting ", direction, " rank ", c.peer(), " (", c.traits().name,
           "); the peer may be stuck, slower, or in a different call");
    case WaitFailure::PeerClosed:
      fail(coilRemoteError, (*call.describe)(), ": rank ", c.peer(), " closed its connection (",
           c.traits().name, ") — it failed, aborted or exited");
    case WaitFailure::PeerDied:
      fail(coilRemoteError, (*call.describe)(), ": rank ", c.peer(), " died (its process is gone)");
    case WaitFailure::Aborted:
      fail(coilRemoteError, (*call.describe)(), ": communicator aborted");
  }
  fail(coilInternalError, "unknown wait failure");
}

// A timeout naming every peer whose input had not arrived, not only the first.
[[noreturn]] void failTimeout(const ReduceCall& call, const transport::WaitWatch& watch,
                              const std::vector<int>& missing, const char* transport) {
  fail(coilTimeout, (*call.describe)(), ": timed out after ", watch.deadline.totalMs(),
       " ms waiting for data from ", rankList(missing), " (", transport, "); ",
       missing.size() == 1 ? "the peer" : "these peers",
       " may be stuck, slower, or in a different call");
}

// Reduces the n inputs in rank order into call.output and finishes coilAvg.
// In place, our input is overwritten by the first kernel call: keep a copy
// when a later call still needs it (rank >= 2).
void reduceAll(const ReduceCall& call, int rank, std::vector<const void*>& inputs) {
  const int n = static_cast<int>(inputs.size());
  const size_t bytes = call.count * reduce::typeSize(call.type);
  thread_local std::vector<uint8_t> saved;
  inputs[rank] = call.input;
  if (call.input == call.output && rank >= 2) {
    saved.assign(static_cast<const uint8_t*>(call.input),
                 static_cast<const uint8_t*>(call.input) + bytes);
    inputs[rank] = saved.data();
  }
  const reduce::ReduceFn fn = reduce::kernel(call.type, call.op);
  fn(call.output, inputs[0], inputs[1], call.count);
  for (int q = 2; q < n; ++q) fn(call.output, call.output, inputs[q], call.count);
  if (call.op == coilAvg) reduce::divider(call.type)(call.output, call.output, call.count, n);
}

void checkArrival(const ReduceCall& call, int peer, uint64_t tag, size_t got, size_t bytes) {
  if (tag != call.tag)
    fail(coilInvalidUsage, (*call.describe)(), ": mismatched collective with rank ", peer, ": ",
         explainMismatch(tag, call.tag));
  if (got != bytes)
    fail(coilInvalidUsage, (*call.describe)(), ": rank ", peer, " sent ", got, " bytes where ",
         bytes, " were expected: the ranks passed different counts");
}

// The express path: every peer's CallerIo, driven by this thread alone. It
// polls for spinUs, then sleeps in the transport's readiness wait in slices,
// checking the abort flag and the deadline between them.
void oneShotOverCallerIo(const std::vector<transport::Connection*>& peers, int rank,
                         const ReduceCall& call, const transport::WaitWatch& watch, int spinUs,
                         bool yield, const std::vector<transport::CallerIo*>& io) {
  const int n = static_cast<int>(peers.size());
  const size_t bytes = call.count * reduce::typeSize(call.type);
  thread_local std::vector<uint8_t> arrived;
  arrived.resize(bytes * static_cast<size_t>(n));
  std::vector<transport::CallerIo*> group;
  for (int k = 1; k < n; ++k) {
    transport::CallerIo* p = io[(rank + k) % n];
    const int q = (rank + k) % n;
    p->beginRecv(arrived.data() + static_cast<size_t>(q) * bytes, bytes, call.tag);
    p->beginSend(call.input, bytes, call.tag);
    group.push_back(p);
  }
  const auto spinUntil = Clock::now() + std::chrono::microseconds(spinUs);
  for (;;) {
    bool moved = false, done = true;
    size_t got;
    uint64_t tag;
    for (int k = 1; k < n; ++k) {
      const int q = (rank + k) % n;
      moved |= io[q]->advance();
      if (!io[q]->failure().empty())
        fail(coilRemoteError, (*call.describe)(), ": ", io[q]->failure());
      done = done && io[q]->sendComplete() && io[q]->recvComplete(&got, &tag);
    }
    if (done) break;
    if (moved) continue;
    if (watch.abortFlag && watch.abortFlag->load(std::memory_order_relaxed))
      fail(coilRemoteError, (*call.describe)(), ": communicator aborted");
    if (watch.deadline.expired()) {
      std::vector<int> missing;
      for (int q = 0; q < n; ++q)
        if (q != rank && (!io[q]->sendComplete() || !io[q]->recvComplete(&got, &tag)))
          missing.push_back(q);
      if (!missing.empty()) failTimeout(call, watch, missing, peers[missing[0]]->traits().name);
    }
    if (Clock::now() < spinUntil) {
      if (yield) sched_yield();
#if defined(__x86_64__)
      else __builtin_ia32_pause();
#endif
      continue;
    }
    watch.checkStall();
    const int ms = watch.deadline.remainingMs();
    group.front()->awaitAny(group, ms < kWaitSliceMs ? (ms > 0 ? ms : 1) : kWaitSliceMs);
  }
  std::vector<const void*> inputs(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    size_t got = 0;
    uint64_t tag = 0;
    io[q]->recvComplete(&got, &tag);
    checkArrival(call, q, tag, got, bytes);
    inputs[q] = arrived.data() + static_cast<size_t>(q) * bytes;
  }
  reduceAll(call, rank, inputs);
}

}  // namespace

void fifoOneShotAllReduce(const std::vector<transport::Connection*>& peers, int rank,
                          const ReduceCall& call, const transport::WaitWatch& watch, int spinUs,
                          bool yield) {
  const int n = static_cast<int>(peers.size());
  const size_t bytes = call.count * reduce::typeSize(call.type);

  // Every peer reachable over a caller-driven path: use those.
  std::vector<transport::CallerIo*> io(static_cast<size_t>(n), nullptr);
  bool express = true;
  for (int q = 0; q < n && express; ++q) {
    if (q == rank) continue;
    io[q] = peers[q]->callerIo();
    express = io[q] != nullptr && io[q]->callerIoMaxBytes() >= bytes;
  }
  if (express) return oneShotOverCallerIo(peers, rank, call, watch, spinUs, yield, io);

  // 1. Our input to every peer, starting with our right neighbour so that
  //    not every rank queues on rank 0 first.
  for (int k = 1; k < n; ++k) {
    transport::Connection& c = *peers[(rank + k) % n];
    WaitFailure why{};
    void* slot = c.sendFifo().acquire(watch, &why);
    if (slot == nullptr) failWait(call, watch, c, why, "for buffer space at");
    if (bytes > c.sendFifo().slotBytes())
      fail(coilInternalError, "one-shot all-reduce of ", bytes, " bytes exceeds the ",
           c.sendFifo().slotBytes(), "-byte slot to rank ", c.peer());
    std::memcpy(slot, call.input, bytes);
    c.sendFifo().publish(static_cast<uint32_t>(bytes), call.tag);
    c.kick();
  }

  // 2. Every peer's input, held in its slot until the reduction is done.
  std::vector<const void*> inputs(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    transport::Connection& c = *peers[q];
    transport::RecvSlot slot;
    WaitFailure why{};
    if (!c.recvFifo().peek(&slot, watch, &why)) {
      if (why == WaitFailure::Timeout) {  // q, and every later peer with nothing in its FIFO
        std::vector<int> missing{q};
        transport::RecvSlot later;
        for (int p = q + 1; p < n; ++p)
          if (p != rank && !peers[p]->recvFifo().tryPeek(&later)) missing.push_back(p);
        failTimeout(call, watch, missing, c.traits().name);
      }
      failWait(call, watch, c, why, "for data from");
    }
    if (slot.tag != call.tag) failForeignSlot((*call.describe)(), q, slot, call.tag);
    checkArrival(call, q, slot.tag, slot.bytes, bytes);
    inputs[q] = slot.data;
  }

  // 3. Reduce in rank order, then free the slots.
  reduceAll(call, rank, inputs);
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    peers[q]->recvFifo().release();
    peers[q]->kick();
  }
}

}  // namespace coil::algo
