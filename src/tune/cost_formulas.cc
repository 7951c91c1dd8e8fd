#include "tune/cost_formulas.h"

#include <algorithm>
#include <cmath>

namespace coil::tune {

bool outgrowsCache(uint64_t cacheBytes, int nranks, double bytes) {
  return cacheBytes != 0 && nranks > 0 &&
         bytes > static_cast<double>(cacheBytes / (4 * static_cast<uint64_t>(nranks)));
}

transport::LinkCost memoryScaled(transport::LinkCost m, uint64_t cacheBytes, int nranks,
                                 double bytes) {
  if (outgrowsCache(cacheBytes, nranks, bytes)) {
    m.betaUsPerB *= m.memoryFactor;
    m.gammaUsPerB *= m.memoryFactor;
  }
  return m;
}

double ringAllReduceUs(const transport::LinkCost& m, int nranks, double S, double C) {
  const double N = nranks, f = (N - 1) / N;
  const double rounds = std::max(1.0, std::ceil(S / (N * std::max(1.0, C))));
  return 2 * (N - 1) * rounds * m.alphaUs + 2 * f * S * m.betaUsPerB + f * S * m.gammaUsPerB;
}

double treeAllReduceUs(const transport::LinkCost& m, const algo::TreeLoad& load, double S,
                       double C) {
  // The first chunk climbs and descends 2·depth hops, each further one adds
  // a hand-off up and one down; the bandwidth terms are the busiest rank's.
  const double chunks = std::max(1.0, std::ceil(S / (2 * std::max(1.0, C))));
  return (2 * load.depth + 2 * (chunks - 1)) * m.alphaUs + load.sentPerByte * S * m.betaUsPerB +
         load.reducedPerByte * S * m.gammaUsPerB;
}

double ringGatherUs(const transport::LinkCost& m, int nranks, double S, bool reduces) {
  const double N = nranks, f = (N - 1) / N;
  return (N - 1) * m.alphaUs + f * S * m.betaUsPerB + (reduces ? f * S * m.gammaUsPerB : 0.0);
}

double hierGatherUs(const transport::LinkCost& link, const transport::LinkCost& local, int nranks,
                    int hosts, int smallest, int largest, double S, bool reduces) {
  const double H = hosts, K = smallest, L = largest, N = nranks;
  const double across = (H - 1) * link.alphaUs + (H - 1) / H * S * link.betaUsPerB +
                        (reduces ? (H - 1) / H * S * link.gammaUsPerB : 0.0);
  const double inside = (L - 1 + K * (L - 1)) * local.alphaUs + (N - 1) / N * S * local.betaUsPerB +
                        (reduces ? (L - 1) / L * S * local.gammaUsPerB : 0.0);
  return across + inside;
}

}  // namespace coil::tune
