#include "model.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "comm/call_of.h"
#include "comm/model_bytes.h"
#include "transports/transport.h"
#include "tune/tuner.h"

namespace coil::sim {

namespace {

std::unique_ptr<transport::Transport> namedTransport(const std::string& name) {
  std::unique_ptr<transport::Transport> t;
  try {
    t = transport::createTransport(name);
  } catch (const std::exception&) {
    std::string known;
    for (const auto& n : transport::registeredTransports()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown transport '" + name + "' (this build has " + known + ")");
  }
  return t;
}

}  // namespace

// The FIFO programs' costs as a communicator of that transport alone runs
// them: on its caller-driven paths where it has them (tcp's express
// sockets), else on its FIFOs.
CostParams transportCosts(const std::string& name) {
  const transport::Traits& t = namedTransport(name)->traits();
  if (t.callerPath.alphaUs > 0)
    return {t.callerPath.alphaUs, t.callerPath.betaUsPerB, t.callerPath.gammaUsPerB,
            name + "'s built-in costs on its caller-driven path"};
  return {t.fifo.alphaUs, t.fifo.betaUsPerB, t.fifo.gammaUsPerB, name + "'s built-in FIFO costs"};
}

namespace {

// A model whose window (when the algorithm needs one) holds the simulated
// call, with `cost` for the simulated algorithm and its piece.
tune::Model modelFor(const Simulation& s, const tune::Cost& cost, tune::Algo algorithm) {
  const Request& r = s.request;
  tune::Topology topo;
  topo.userTuning = false;  // the costs coil-sim prints, not the user's calibration
  topo.nranks = r.nranks;
  topo.fifo = topo.oneShot = topo.local = cost;
  topo.chunkBytes = r.chunkElems * r.elementBytes;  // the simulated chunk, not a per-call one
  topo.cacheBytes = size_t{1} << 62;                // in cache: no memory factor
  if (s.form == Form::kWindow) {
    topo.windowSlotBytes = size_t{1} << 40;
    topo.windowInlineBytes = 1908;
  }
  std::map<int, int> perHost;
  for (int h : r.hostOf) ++perHost[h];
  if (!perHost.empty()) {
    topo.hosts = static_cast<int>(perHost.size());
    topo.smallestHost = topo.largestHost = perHost.begin()->second;
    for (const auto& [h, k] : perHost) {
      topo.smallestHost = std::min(topo.smallestHost, k);
      topo.largestHost = std::max(topo.largestHost, k);
    }
  }
  tune::Model model(topo);
  tune::ModelParams p = model.params();
  if (algorithm == tune::Algo::kOneShot)
    (s.form == Form::kWindow ? p.windowOneShot : p.fifoOneShot) = cost;
  if (algorithm == tune::Algo::kSlice) p.slice = cost;
  p.slicePieceBytes = r.chunkElems * r.elementBytes;
  p.lineTransferUs = 0;  // the simulation has no separate line transfer after the flag
  model.adopt(p);
  return model;
}

}  // namespace

CostParams algorithmCosts(const std::string& name, const Simulation& s) {
  const algo::AlgorithmProgram& algorithm = *s.request.algorithm;
  if (s.form == Form::kFifo || s.form == Form::kExchange) {
    // The tuner's topology takes its FIFO one-shot costs from here
    // (src/comm/communicator.cc: topology.oneShot).
    const transport::LinkCost c = namedTransport(name)->traits().oneShot;
    return {c.alphaUs, c.betaUsPerB, c.gammaUsPerB, name + "'s built-in one-shot costs"};
  }
  CostParams fifo = transportCosts(name);
  if (algorithm.deviceOnly != algo::DeviceOnly::kNo) {
    fifo.source += " (standing in: device windows have no cost model yet)";
    return fifo;
  }
  tune::Algo a;
  if (s.form != Form::kWindow || !tune::parseAlgo(algorithm.name, &a)) return fifo;
  tune::Topology topo;
  topo.userTuning = false;  // the built-in costs, as the source says
  topo.nranks = 2;
  topo.windowSlotBytes = size_t{1} << 20;
  const tune::Model model(topo);
  const tune::Cost c = model.cost(a);
  return {c.alphaUs, c.betaUsPerB, c.gammaUsPerB,
          std::string("the shared window's built-in ") + algorithm.name + " costs"};
}

std::optional<double> tunerPredictionUs(const Simulation& s, const CostParams& p) {
  const Request& r = s.request;
  tune::Algo algorithm;
  if (!tune::parseAlgo(r.algorithm->name, &algorithm)) return std::nullopt;
  const tune::Cost cost{p.alphaUs, p.betaUsPerB, p.gammaUsPerB, 1.0};
  const tune::Model model = modelFor(s, cost, algorithm);
  const algo::Call call =
      callOf({r.collective, nullptr, nullptr, r.count, coilFloat32, coilSum, r.root});
  return model.predictUs(r.collective, algorithm, modelBytes(call.kind, call.bytes, r.nranks));
}

}  // namespace coil::sim
