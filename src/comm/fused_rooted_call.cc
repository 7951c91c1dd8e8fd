// A small rooted call whose data rides in its own agreement step.
//
// Broadcast, reduce, gather and scatter first agree on the call
// (call_agreement.cc): one small all-reduce that carries every rank's
// record of its call. Without a shared window (tcp, or a communicator over
// several hosts) that is a one-shot over the FIFOs or tcp's express sockets,
// ~10 µs on loopback, and the call after it costs another round or more of
// proxy hand-offs: a 2-rank 8-byte broadcast over tcp took 68 µs against
// 11 µs for an all-reduce of the same size (docs/performance.md 4.6).
//
// When the data is small, it travels in that same one-shot instead: the
// exchange becomes records followed by a payload region, summed as uint64
// (each word has one writer and zeros elsewhere, so the sum is exact):
//
//   broadcast  payload = S        the root writes its buffer
//   scatter    payload = n × S    the root writes all n blocks
//   gather     payload = n × S    rank q writes block q
//   reduce     payload = n × S    rank q writes block q; the root reduces
//                                 the blocks in rank order, as the one-shot
//                                 all-reduce does
//
// Every rank checks the records first, exactly as the agreement alone does,
// and only then takes its result from the payload. Ranks that disagree on
// the count exchange different sizes and fail with "different counts";
// on anything else the records name both calls. One round in all.
//
// Not taken with a shared window (there the agreement costs under a
// microsecond and the window algorithms are faster than the one-shot), nor
// when COIL_ALGO chose this collective's algorithm.
#include <cstring>
#include <vector>

#include "algorithms/fifo_oneshot.h"
#include "comm/communicator.h"
#include "core/error.h"
#include "core/log.h"
#include "reduce/reduce.h"

namespace coil {
namespace {

// The most payload one rank sends in the fused exchange, (n-1) × payload
// (the records add 24 bytes per rank): every rank sends its whole exchange
// to every peer, so for gather, scatter and reduce the bytes grow as n²·S.
// Measured 2026-11-28 on the 2-vCPU VM over tcp (coil_perf, before and
// after interleaved, medians of 3): with 2 ranks the fused call was faster
// wherever it sent up to 128 KiB (broadcast 2.8x at 64 KiB; reduce 1.6x at
// 64 KiB per rank, 128 KiB sent); with 3 ranks a reduce of 32 KiB per rank
// (192 KiB sent) was 0.8x. 64 KiB leaves a margin.
constexpr size_t kFusedMaxSentBytes = 64 * 1024;

size_t roundUp8(size_t bytes) { return (bytes + 7) / 8 * 8; }

}  // namespace

size_t Communicator::fusedRootedBytes(const algo::Call& call, bool algorithmForced) const {
  if (window_ || algorithmForced || nranks_ < 2 || !algo::hasRoot(call.kind)) return 0;
  const size_t n = static_cast<size_t>(nranks_);
  const size_t payload = call.kind == algo::CollKind::Broadcast ? call.bytes : n * call.bytes;
  const size_t total = n * kCallRecordBytes + roundUp8(payload);
  if ((n - 1) * payload > kFusedMaxSentBytes ||
      !model_.available(algo::CollKind::AllReduce, tune::Algo::kOneShot, total))
    return 0;
  return total;
}

bool Communicator::runFusedRootedCall(const algo::Call& call, uint64_t agreementTag,
                                      bool algorithmForced) {
  const size_t total = fusedRootedBytes(call, algorithmForced);
  if (total == 0) return false;
  const size_t n = static_cast<size_t>(nranks_);
  const size_t S = call.bytes;
  const size_t recordsBytes = n * kCallRecordBytes;
  flight_.setAlgorithm("oneshot with the agreement");
  if (log::enabled(log::Level::Info, log::kColl))
    COIL_INFO(kColl, call.description(), ": data and agreement in one one-shot of ", total,
              " bytes");

  std::vector<uint64_t>& words = fusedScratch_;
  words.assign(total / sizeof(uint64_t), 0);
  uint8_t* base = reinterpret_cast<uint8_t*>(words.data());
  uint8_t* region = base + recordsBytes;
  writeCallRecord(call, base + static_cast<size_t>(rank_) * kCallRecordBytes);
  const auto* in = static_cast<const uint8_t*>(call.input);
  const bool root = rank_ == call.root;
  switch (call.kind) {
    case algo::CollKind::Broadcast:
      if (root) std::memcpy(region, in, S);
      break;
    case algo::CollKind::Scatter:
      if (root) std::memcpy(region, in, n * S);
      break;
    case algo::CollKind::Gather:
    case algo::CollKind::Reduce:
      std::memcpy(region + static_cast<size_t>(rank_) * S, in, S);
      break;
    default:
      fail(coilInternalError, call.description(), ": no fused form for this collective");
  }

  algo::Call exchange = call;
  exchange.kind = algo::CollKind::AllReduce;
  exchange.sendbuff = exchange.input = base;
  exchange.recvbuff = exchange.output = base;
  exchange.count = total / sizeof(uint64_t);
  exchange.elementBytes = sizeof(uint64_t);
  exchange.bytes = total;
  exchange.type = coilUint64;
  exchange.op = exchange.reduceOp = coilSum;
  exchange.root = 0;
  exchange.tag = agreementTag;
  const tune::WaitPlan plan = spin_.planFor(total);
  algo::fifoOneShotAllReduce(peers_, rank_, exchange, plan.spinUs, plan.yield);

  checkCallRecords(call, base);
  auto* out = static_cast<uint8_t*>(call.recvbuff);
  switch (call.kind) {
    case algo::CollKind::Broadcast:
      std::memcpy(out, region, S);
      break;
    case algo::CollKind::Scatter:
      std::memcpy(out, region + static_cast<size_t>(rank_) * S, S);
      break;
    case algo::CollKind::Gather:
      if (root) std::memcpy(out, region, n * S);
      break;
    case algo::CollKind::Reduce:
      if (root) {
        std::vector<const void*>& blocks = fusedBlocks_;
        blocks.resize(n);
        for (size_t q = 0; q < n; ++q) blocks[q] = region + q * S;
        reduce::reduceInRankOrder(call.type, call.reduceOp, out, blocks.data(), nranks_,
                                  call.count);
      }
      break;
    default:
      break;
  }
  return true;
}

}  // namespace coil
