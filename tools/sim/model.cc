#include "model.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "comm/model_bytes.h"
#include "transports/transport.h"
#include "tune/tuner.h"

namespace coil::sim {

CostParams transportCosts(const std::string& name) {
  std::unique_ptr<transport::Transport> t;
  try {
    t = transport::createTransport(name);
  } catch (const std::exception&) {
    std::string known;
    for (const auto& n : transport::registeredTransports()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown transport '" + name + "' (this build has " + known + ")");
  }
  const transport::LinkCost& c = t->traits().fifo;
  return {c.alphaUs, c.betaUsPerB, c.gammaUsPerB, name + "'s built-in FIFO costs"};
}

std::optional<double> tunerPredictionUs(const Simulation& s, const CostParams& p) {
  const Request& r = s.request;
  tune::Algo algorithm;
  if (!tune::parseAlgo(r.algorithm->name, &algorithm)) return std::nullopt;
  const tune::Cost cost{p.alphaUs, p.betaUsPerB, p.gammaUsPerB, 1.0};
  tune::Topology topo;
  topo.nranks = r.nranks;
  topo.fifo = topo.oneShot = topo.local = cost;
  topo.chunkBytes = r.chunkElems * r.elementBytes;  // the simulated chunk, not a per-call one
  topo.cacheBytes = size_t{1} << 62;                // in cache: no memory factor
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
  const tune::Model model(topo);
  const CollectiveCall call{r.collective, nullptr, nullptr, r.count, coilFloat32, coilSum, r.root};
  return model.predictUs(r.collective, algorithm, modelBytes(call, r.nranks));
}

}  // namespace coil::sim
