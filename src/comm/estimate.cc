// What coilGroupSimulateEnd reports: the cost model's prediction for the
// calls of a group, without running them (tune/tuner.h has the model).
#include <algorithm>

#include "comm/call_of.h"
#include "comm/communicator.h"
#include "comm/model_bytes.h"
#include "reduce/reduce.h"

namespace coil {

double Communicator::estimateUs(const CollectiveCall& call) const {
  if (call.count == 0) return 0;
  const algo::Call c = callOf(call);
  const size_t bytes = modelBytes(call.kind, c.bytes, nranks_);
  const tune::Choice choice = tune::choose(model_, call.kind, bytes, algoOverride_, nullptr);
  // With a rooted call's agreement (call_agreement.cc), unless its data
  // rides in it (the rooted one-shot).
  return model_.callUs(call.kind, choice.algorithm, bytes);
}

// Point-to-point operations of one batch progress together: the batch takes
// one hand-off plus the time to move the larger of what this rank sends and
// what it receives over the slowest link. Where every message of the batch
// takes a caller-driven path (p2p_task.h), the hand-off is one message's
// hop (the one-shot's α) and the bytes go at that path's rate.
double Communicator::estimateUs(const std::vector<P2pCall>& calls) const {
  size_t sent = 0, received = 0;
  bool onCallerPaths = true;
  for (const P2pCall& c : calls) {
    (c.isSend ? sent : received) += c.count * reduce::typeSize(c.type);
    if (c.peer != rank_)
      onCallerPaths = onCallerPaths && callerPieceBytes(*peers_[c.peer], P2pPath::kFastest) != 0;
  }
  if (sent == 0 && received == 0) return 0;
  const tune::Topology& t = model_.topology();
  const double alphaUs = onCallerPaths ? t.oneShot.alphaUs : t.fifo.alphaUs;
  const double betaUsPerB = onCallerPaths ? t.callerPath.betaUsPerB : t.fifo.betaUsPerB;
  return alphaUs + static_cast<double>(std::max(sent, received)) * betaUsPerB;
}

}  // namespace coil
