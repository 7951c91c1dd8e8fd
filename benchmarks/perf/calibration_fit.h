// The whole --calibrate fit as one function of the measured samples, so
// that it can be repeated with a size left out: the error --calibrate
// reports at a size comes from a model fitted WITHOUT that size. A model
// judged on the points it was fitted to looks better than it is (the memory
// factor, fitted to the one or two sizes beyond the cache, matched them to
// 0%).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "model_fit.h"
#include "predict.h"

namespace coil_perf {

/// The best time of every size of the three sweeps --calibrate times.
struct CalibrationSamples {
  std::vector<Sample> gather;  ///< in-place all-gather, every size
  std::vector<Sample> ring;    ///< in-place all-reduce, COIL_ALGO=allreduce:ring
  std::vector<Sample> tree;    ///< in-place all-reduce, COIL_ALGO=allreduce:tree
};

struct FitSetting {
  int nranks = 2;
  size_t chunkBytes = 0;
  size_t cacheBytes = 0;  ///< the machine's last-level cache
};

struct CalibrationFit {
  Calibration model;
  double rawGamma = 0;  ///< γ before the clamp to >= 0 (fitRingGamma)
};

/// α and β from the all-gather, γ from the ring, the tree's β, then each
/// algorithm's memory factor from its sizes beyond the cache; α, β, γ come
/// from the sizes within the cache unless too few are. Throws
/// std::invalid_argument when the samples are too few for a fit.
CalibrationFit fitCalibration(const CalibrationSamples& samples, const FitSetting& setting);

/// The three sweeps without the samples of `bytes`.
CalibrationSamples withoutSize(const CalibrationSamples& samples, double bytes);

/// Which of the three sweeps a held-out error is about.
enum class Fitted { AllGather, Ring, Tree };

/// The time the model predicts at `bytes` for `which` when fitted without
/// the samples of that size; nullopt when what is left is too little to fit.
std::optional<double> heldOutPredictionUs(const CalibrationSamples& samples,
                                          const FitSetting& setting, Fitted which, double bytes);

}  // namespace coil_perf
