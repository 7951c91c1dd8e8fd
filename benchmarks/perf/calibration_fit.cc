#include "calibration_fit.h"

#include <stdexcept>

namespace coil_perf {
namespace {

std::vector<Sample> without(const std::vector<Sample>& samples, double bytes) {
  std::vector<Sample> out;
  for (const Sample& s : samples)
    if (s.bytes != bytes) out.push_back(s);
  return out;
}

}  // namespace

CalibrationFit fitCalibration(const CalibrationSamples& samples, const FitSetting& setting) {
  const int n = setting.nranks;
  const size_t chunk = setting.chunkBytes;
  ModelParams probe;
  probe.cacheBytes = setting.cacheBytes;
  probe.memoryFactor = 2;  // any value != 1 tells the sizes beyond the cache
  // The sizes whose buffers stay in the cache, or all of them when fewer
  // would remain than a fit needs.
  auto inCache = [&](const std::vector<Sample>& all, size_t needed) {
    std::vector<Sample> kept;
    for (const Sample& s : all)
      if (memoryScale(probe, n, s.bytes) == 1.0) kept.push_back(s);
    return kept.size() >= needed ? kept : all;
  };
  CalibrationFit out;
  ModelParams m = fitAllGather(inCache(samples.gather, 2), n);
  m.cacheBytes = setting.cacheBytes;
  m.gammaUsPerByte = fitRingGamma(inCache(samples.ring, 1), n, m, chunk, &out.rawGamma);
  Calibration& c = out.model;
  c = Calibration{m, m};
  c.tree.betaUsPerByte = fitTreeBeta(inCache(samples.tree, 1), n, m, chunk);
  c.ring.memoryFactor = fitMemoryFactor(samples.ring, n, c.ring, [&](const ModelParams& p, double S) {
    return predictRingAllReduceUs(p, n, S, chunk);
  });
  c.tree.memoryFactor = fitMemoryFactor(samples.tree, n, c.tree, [&](const ModelParams& p, double S) {
    return predictTreeAllReduceUs(p, n, S, chunk);
  });
  return out;
}

CalibrationSamples withoutSize(const CalibrationSamples& samples, double bytes) {
  return {without(samples.gather, bytes), without(samples.ring, bytes),
          without(samples.tree, bytes)};
}

std::optional<double> heldOutPredictionUs(const CalibrationSamples& samples,
                                          const FitSetting& setting, Fitted which, double bytes) {
  Calibration c;
  try {
    c = fitCalibration(withoutSize(samples, bytes), setting).model;
  } catch (const std::invalid_argument&) {
    return std::nullopt;  // the other sizes cannot pin the parameters down
  }
  switch (which) {
    case Fitted::AllGather: return predictAllGatherUs(c.ring, setting.nranks, bytes);
    case Fitted::Ring: return predictRingAllReduceUs(c.ring, setting.nranks, bytes, setting.chunkBytes);
    case Fitted::Tree: return predictTreeAllReduceUs(c.tree, setting.nranks, bytes, setting.chunkBytes);
  }
  return std::nullopt;
}

}  // namespace coil_perf
