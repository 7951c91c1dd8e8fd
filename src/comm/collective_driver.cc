// From one API call to one algorithm run: build the call value once
// (algorithms/call.h), pick the algorithm (tune/), stamp the fingerprint,
// set up the buffers the algorithm expects, then run either
//   - a direct all-reduce (one-shot or slice over the shared window, or the
//     one-shot over FIFOs): runDirect, or
//   - a per-rank program over Primitives: on the caller-driven paths where
//     every peer has one (tcp's express sockets), else on the FIFO executor.
// Any failure breaks the communicator.
#include <algorithm>
#include <cstring>
#include <functional>
#include <sstream>
#include <vector>

#include "algorithms/call.h"
#include "algorithms/caller_path_executor.h"
#include "algorithms/fifo_executor.h"
#include "algorithms/fifo_oneshot.h"
#include "algorithms/registry.h"
#include "algorithms/tree_shape.h"
#include "algorithms/window_allreduce.h"
#include "comm/call_of.h"
#include "comm/communicator.h"
#include "comm/mismatch_probe.h"
#include "comm/model_bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "reduce/reduce.h"

namespace coil {
namespace {

using algo::CollKind;

// "allreduce #12 (1024 x float32, sum)", for messages and logs.
struct CallText {
  const algo::Call& c;
  uint32_t seq;
  std::string operator()() const {
    std::ostringstream desc;
    desc << algo::collName(c.kind) << " #" << seq << " (" << c.count << " x "
         << reduce::typeName(c.type);
    if (algo::reduces(c.kind))
      desc << ", " << (reduce::validOp(c.op) ? reduce::opName(c.op) : "premulsum");
    if (algo::hasRoot(c.kind)) desc << ", root " << c.root;
    desc << ")";
    return desc.str();
  }
};

}  // namespace

void Communicator::collective(const CollectiveCall& call) {
  checkUsable();
  const uint32_t seq = ++seq_;  // every rank counts every call, even empty ones
  if (call.count == 0) return;
  // The deadline's coarse clock read is also the recorder's start time.
  const Deadline deadline = deadline_.forCall(options_.timeoutMs);
  FlightRecorder::Scope record(flight_, call.kind, seq, call.count, call.type, call.op, call.root,
                               deadline_.calledAtMs());
  try {
    LinkClaim claim(*this);
    runScheduled(call, seq, deadline);
  } catch (const Error& e) {
    if (!revokedOrAborted()) {
      record.fail();
      breakWith(e);
    }
  }
  // Revoked or aborted while it ran: the call fails, and says why, whatever
  // its algorithm met. It may have completed (a waiter woken by the revoke
  // can run only after a peer posted), or failed on the links the revoke
  // closed ("closed on this side"): the caller that stopped it sees it stop.
  if (revokedOrAborted()) {
    record.fail();
    breakWith(Error(coilRemoteError, CallText{callOf(call), seq}() +
                                         ": the communicator was revoked or aborted during the call"));
  }
  record.complete();
}

void Communicator::runScheduled(const CollectiveCall& asked, uint32_t seq, const Deadline& deadline) {
  algo::Call call = callOf(asked);
  call.sliceElems = sliceBytes_ / call.elementBytes;

  const bool logTune = log::enabled(log::Level::Info, log::kTune);
  std::vector<tune::Prediction> predictions;
  const tune::Choice choice =
      tune::choose(model_, call.kind, modelBytes(call.kind, call.bytes, nranks_), algoOverride_,
                   logTune ? &predictions : nullptr);
  flight_.setAlgorithm(tune::algoName(choice.algorithm));
  // On the caller-driven paths a chunk is at most one piece; on the FIFOs it
  // is whole slices, at most half the FIFO. (The model's chunk never exceeds
  // either.)
  const size_t callerPiece = model_.callerPieceBytes();
  if (callerPiece != 0)
    call.chunkElems = std::max<size_t>(1, std::min(choice.chunkBytes, callerPiece) / call.elementBytes);
  else
    call.chunkElems =
        call.sliceElems * std::clamp<size_t>(choice.chunkBytes / sliceBytes_, 1, slicesPerChunk_);
  // The root is part of the fingerprint: ranks disagreeing on it fail loudly.
  call.tag = algo::callTag(seq + seqSalt_, call.kind, call.type, call.op, call.count, call.root);
  // Text for messages and logs; built only when one needs it. (Held by
  // reference, the std::function never allocates on this per-call path.)
  const CallText text{call, seq};
  const std::function<std::string()> describe = std::cref(text);
  call.describe = &describe;
  if (logTune) {
    std::ostringstream costs;
    for (const auto& p : predictions) costs << " " << tune::algoName(p.algorithm) << "=" << p.microseconds << "us";
    // The chunk matters to the FIFO programs; one-shot and slice have none.
    const bool direct = choice.algorithm == tune::Algo::kOneShot || choice.algorithm == tune::Algo::kSlice;
    const std::string chunk =
        direct ? "" : ", chunk " + std::to_string(call.chunkElems * call.elementBytes / 1024) + " KiB";
    COIL_INFO(kTune, describe(), ": predicted", costs.str(), " -> ", tune::algoName(choice.algorithm),
              chunk,
              choice.forced ? " (forced by COIL_ALGO)"
                            : choice.forcedUnavailable ? " (COIL_ALGO's choice cannot run this call)" : "");
  }

  // A pre-multiplied sum scales this rank's input once, then sums.
  std::vector<uint8_t> scaled;
  if (algo::reduces(call.kind) && !reduce::validOp(call.op)) {
    const PreMulSum& pm = preMulOps_.at(call.op);
    const size_t blocks = call.kind == CollKind::ReduceScatter ? static_cast<size_t>(nranks_) : 1;
    const size_t elems = call.count * blocks;
    const size_t esize = call.elementBytes;
    const void* scalar = pm.scalarPtr ? pm.scalarPtr : pm.immediate.data();
    scaled.resize(call.bytes * blocks);
    std::vector<uint8_t> splat(std::min<size_t>(elems, 4096) * esize);
    for (size_t i = 0; i * esize < splat.size(); ++i) std::memcpy(&splat[i * esize], scalar, esize);
    auto mul = reduce::kernel(call.type, coilProd);
    for (size_t o = 0; o < elems; o += 4096) {
      size_t n = std::min<size_t>(4096, elems - o);
      mul(&scaled[o * esize], static_cast<const uint8_t*>(call.sendbuff) + o * esize, splat.data(),
          n);
    }
    call.input = scaled.data();
    call.reduceOp = coilSum;
  }

  // The FIFO waits of one collective poll (yielding) for up to COIL_SPIN_US
  // before sleeping: after the first slice the peers are inside the same call.
  call.watch = {deadline, abortFlag_, maxSpinUs_};
  // Rooted collectives first check that every rank is in the same call
  // (call_agreement.cc); a stalled wait looks for peers in a different one.
  const uint64_t agreement =
      algo::hasRoot(call.kind) && nranks_ > 1 ? agreementTag(call.kind, seq) : 0;
  const MismatchProbe probe(peers_, links_->everShared(), window_.get(), rank_, call.tag,
                            agreement, describe);
  call.watch.stall = &probe;
  if (agreement != 0) {
    if (choice.algorithm == tune::Algo::kOneShot) return runRootedOneShot(call, agreement);
    agreeOnCall(call, agreement);
  }
  if (runDirect(call, choice.algorithm)) return;

  // The buffers as the program's layout wants them (algorithms/registry.h).
  const algo::AlgorithmProgram* program =
      algo::findProgram(call.kind, tune::algoName(choice.algorithm));
  if (!program || !program->program)
    fail(coilInternalError, describe(), ": no FIFO program for algorithm ",
         tune::algoName(choice.algorithm));
  const size_t bytes = call.bytes;
  uint8_t* out = static_cast<uint8_t*>(call.recvbuff);
  const uint8_t* in = static_cast<const uint8_t*>(call.input);
  switch (program->layout) {
    case algo::Layout::kSeparate: break;
    case algo::Layout::kInPlace:
    case algo::Layout::kInPlaceAtRoot:
      if ((program->layout == algo::Layout::kInPlace || rank_ == call.root) && out != in)
        std::memmove(out, in, bytes);
      call.input = call.recvbuff;
      break;
    case algo::Layout::kInPlaceOwnBlock: {
      uint8_t* mine = out + static_cast<size_t>(rank_) * bytes;
      if (mine != in) std::memmove(mine, in, bytes);
      call.input = call.recvbuff;
      break;
    }
    case algo::Layout::kAccumulate:
      // The root accumulates in its recvbuff; another rank with two
      // children in scratch (its recvbuff is not the caller's to write);
      // the others only read their input.
      if (rank_ == call.root) {
        if (out != in) std::memmove(out, in, bytes);
        call.input = call.recvbuff;
      } else if (algo::treeNode(0, rank_, nranks_, call.root).children() == 2) {
        if (reduceScratch_.size() < bytes) reduceScratch_.resize(bytes);
        std::memcpy(reduceScratch_.data(), in, bytes);
        call.input = call.output = reduceScratch_.data();
      }
      break;
    case algo::Layout::kScratch: {
      // All n blocks of the input, to be reduced in place; this rank's block
      // goes to the caller's output after the program.
      const size_t all = bytes * static_cast<size_t>(nranks_);
      if (reduceScratch_.size() < all) reduceScratch_.resize(all);
      std::memcpy(reduceScratch_.data(), in, all);
      call.input = call.output = reduceScratch_.data();
      break;
    }
  }
  if (program->outputAtOwnBlock) call.outputOrigin = call.count * static_cast<size_t>(rank_);

  if (log::enabled(log::Level::Info, log::kColl))
    COIL_INFO(kColl, describe(), ": ", tune::algoName(choice.algorithm), ", chunk ",
              call.chunkElems, " elements",
              callerPiece != 0                ? " on the caller-driven paths"
              : model_.mixedCallerPaths() ? " on the caller-driven paths where a link has one"
                                              : "");

  const algo::CallShape shape = algo::shapeOf(call, rank_, nranks_, &hostOfRank_);
  if (callerPiece != 0 || model_.mixedCallerPaths()) {
    // Its waits poll (yielding) as the FIFO waits do, then sleep. With links
    // of both kinds its pieces are the FIFO chunks above.
    algo::CallerPathExecutor exec(peers_, call, call.watch.pollUs, true);
    program->program(exec, shape);
    exec.drain();
  } else {
    algo::FifoExecutor exec(peers_, call);
    program->program(exec, shape);
  }
  if (program->layout == algo::Layout::kScratch)
    std::memcpy(call.recvbuff, reduceScratch_.data() + static_cast<size_t>(rank_) * bytes, bytes);
}

// The all-reduce algorithms that are not Primitives programs: the one-shot
// (through the window, the caller-driven paths or the FIFOs) and the
// slice-parallel all-reduce through the window. False when `algorithm` is
// none of them.
bool Communicator::runDirect(const algo::Call& call, tune::Algo algorithm) {
  if (call.kind != CollKind::AllReduce && call.kind != CollKind::Barrier) return false;
  if (algorithm != tune::Algo::kOneShot && algorithm != tune::Algo::kSlice) return false;
  if (log::enabled(log::Level::Info, log::kColl)) {
    const algo::OneShotPaths paths = oneShotPaths();
    COIL_INFO(kColl, call.description(), ": ", tune::algoName(algorithm),
              window_                             ? " through the shared window"
              : call.bytes <= paths.everyLink      ? " through the caller-driven paths"
              : call.bytes <= paths.whereLinksHave ? " through the caller-driven paths where links "
                                                     "have them, the FIFOs elsewhere"
                                                   : " through the FIFOs");
  }
  const tune::WaitPlan plan = spin_.planFor(call.bytes);
  const auto start = plan.measure ? Clock::now() : Clock::time_point{};
  if (algorithm == tune::Algo::kSlice) {
    window_->setPolling(plan.spinUs, plan.yield);
    algo::windowSliceAllReduce(*window_, call,
                               {model_.slicePieceBytes(), call.bytes >= model_.streamFromBytes(),
                                maxSpinUs_});
  } else if (window_) {
    window_->setPolling(plan.spinUs, plan.yield);
    algo::windowOneShotAllReduce(*window_, call);
  } else {
    algo::fifoOneShotAllReduce(peers_, rank_, call, oneShotPaths(), plan.spinUs, plan.yield);
  }
  if (plan.measure)
    spin_.record(call.bytes, plan,
                 std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  return true;
}

}  // namespace coil
