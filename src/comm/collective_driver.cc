// From one API call to one algorithm run: pick the algorithm (tune/), set up
// the buffers the algorithm expects, stamp the fingerprint, run the per-rank
// program on the FIFO executor. Any failure breaks the communicator.
#include <cstring>
#include <sstream>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/fifo_executor.h"
#include "comm/communicator.h"
#include "core/error.h"
#include "core/log.h"
#include "reduce/reduce.h"

namespace coil {
namespace {

using algo::CollKind;

bool hasRoot(CollKind k) {
  return k == CollKind::Broadcast || k == CollKind::Reduce || k == CollKind::Gather ||
         k == CollKind::Scatter;
}

bool hasOp(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::Reduce || k == CollKind::ReduceScatter;
}

// Bytes the cost model sees: the per-rank buffer, or all blocks together.
size_t modelBytes(const CollectiveCall& c, int n) {
  size_t b = c.count * reduce::typeSize(c.type);
  switch (c.kind) {
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
    case CollKind::AllToAll:
    case CollKind::Gather:
    case CollKind::Scatter: return b * static_cast<size_t>(n);
    default: return b;
  }
}

using Program = void (*)(algo::Primitives&, const algo::CallShape&);

Program programFor(CollKind kind, const std::string& a) {
  switch (kind) {
    case CollKind::AllReduce:
    case CollKind::Barrier: return a == "tree" ? algo::doubleTreeAllReduce : algo::ringAllReduce;
    case CollKind::Broadcast: return a == "tree" ? algo::treeBroadcast : algo::ringBroadcast;
    case CollKind::Reduce: return algo::chainReduce;
    case CollKind::AllGather: return algo::ringAllGather;
    case CollKind::ReduceScatter: return algo::ringReduceScatter;
    case CollKind::AllToAll: return algo::pairwiseAllToAll;
    case CollKind::Gather: return algo::directGather;
    case CollKind::Scatter: return algo::directScatter;
    case CollKind::SendRecv: break;
  }
  fail(coilInternalError, "no program for collective ", static_cast<int>(kind));
}

}  // namespace

void Communicator::collective(const CollectiveCall& call) {
  checkUsable();
  const uint32_t seq = ++seq_;  // every rank counts every call, even empty ones
  if (call.count == 0) return;
  try {
    runScheduled(call, seq);
  } catch (const Error& e) {
    breakWith(e);
  }
}

void Communicator::runScheduled(const CollectiveCall& c, uint32_t seq) {
  const size_t esize = reduce::typeSize(c.type);
  const size_t sliceElems = sliceBytes_ / esize;
  const size_t chunkElems = sliceElems * slicesPerChunk_;

  std::vector<tune::Prediction> predictions;
  const std::string algorithm =
      tune::choose(c.kind, modelBytes(c, nranks_), nranks_, chunkElems * esize, linkModel_,
                   algoOverride_, log::enabled(log::Level::Info, log::kTune) ? &predictions : nullptr);

  algo::CallData data;
  data.input = c.sendbuff;
  data.output = c.recvbuff;
  data.count = c.count;
  data.type = c.type;
  data.op = c.op;
  data.rank = rank_;
  data.nranks = nranks_;
  // The root is part of the fingerprint: ranks disagreeing on it fail loudly.
  data.tag = algo::Fingerprint{seq, c.kind, c.type, hasOp(c.kind) ? c.op : coilSum,
                               c.count ^ (static_cast<uint64_t>(c.root) << 48)}
                 .encode();

  // A pre-multiplied sum scales this rank's input once, then sums.
  std::vector<uint8_t> scaled;
  if (hasOp(c.kind) && !reduce::validOp(c.op)) {
    const PreMulSum& pm = preMulOps_.at(c.op);
    const size_t elems = c.kind == CollKind::ReduceScatter ? c.count * nranks_ : c.count;
    const void* scalar = pm.scalarPtr ? pm.scalarPtr : pm.immediate.data();
    scaled.resize(elems * esize);
    std::vector<uint8_t> splat(std::min<size_t>(elems, 4096) * esize);
    for (size_t i = 0; i * esize < splat.size(); ++i) std::memcpy(&splat[i * esize], scalar, esize);
    auto mul = reduce::kernel(c.type, coilProd);
    for (size_t o = 0; o < elems; o += 4096) {
      size_t n = std::min<size_t>(4096, elems - o);
      mul(&scaled[o * esize], static_cast<const uint8_t*>(c.sendbuff) + o * esize, splat.data(), n);
    }
    data.input = scaled.data();
    data.op = coilSum;
  }

  // Buffer layouts the algorithms expect (collectives.h).
  const bool inPlaceAlgo = (c.kind == CollKind::AllReduce && algorithm == "tree") ||
                           (c.kind == CollKind::Broadcast && algorithm == "tree") ||
                           c.kind == CollKind::AllGather;
  if (inPlaceAlgo) {
    const size_t bytes = c.count * esize;
    uint8_t* out = static_cast<uint8_t*>(c.recvbuff);
    const uint8_t* in = static_cast<const uint8_t*>(data.input);
    if (c.kind == CollKind::AllGather) {
      uint8_t* mine = out + static_cast<size_t>(rank_) * bytes;
      if (mine != in) std::memmove(mine, in, bytes);
    } else if (c.kind == CollKind::AllReduce || rank_ == c.root) {
      if (out != in) std::memmove(out, in, bytes);
    }
    data.input = c.recvbuff;
  }
  if (c.kind == CollKind::ReduceScatter) data.outputOrigin = c.count * static_cast<size_t>(rank_);

  std::ostringstream desc;
  desc << algo::collName(c.kind) << " #" << seq << " (" << c.count << " x "
       << reduce::typeName(c.type);
  if (hasOp(c.kind)) desc << ", " << (reduce::validOp(c.op) ? reduce::opName(c.op) : "premulsum");
  if (hasRoot(c.kind)) desc << ", root " << c.root;
  desc << ")";
  data.description = desc.str();
  if (!predictions.empty()) {
    std::ostringstream costs;
    for (const auto& p : predictions) costs << " " << p.algorithm << "=" << p.microseconds << "us";
    COIL_INFO(kTune, data.description, ": predicted", costs.str(), " -> ", algorithm,
              algoOverride_.forced(c.kind).empty() ? "" : " (forced by COIL_ALGO)");
  }
  COIL_INFO(kColl, data.description, ": ", algorithm, ", chunk ", chunkElems, " elements");

  algo::CallShape shape{rank_, nranks_, c.count, chunkElems, c.root};
  transport::WaitWatch watch{Deadline::after(options_.timeoutMs), abortFlag_};
  algo::FifoExecutor exec(peers_, sliceBytes_, watch, data);
  programFor(c.kind, algorithm)(exec, shape);
}

}  // namespace coil
