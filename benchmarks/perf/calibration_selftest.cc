// --calibrate's error column judges the model on sizes it was not fitted
// to. The memory factor is fitted to the sizes beyond the cache; when only
// one size is, the in-sample error there is 0% by construction, and only
// the held-out error shows what the model would predict.
#include <gtest/gtest.h>

#include <cmath>

#include "calibration_fit.h"
#include "predict.h"

namespace coil_perf {
namespace {

constexpr size_t kChunk = 1 << 20;

// Samples of every sweep from `ring` (all-gather and ring) and `tree`, at
// 256 KiB .. 64 MiB (the all-gather from 8 B).
CalibrationSamples exactSamples(const ModelParams& ring, const ModelParams& tree, int n) {
  CalibrationSamples s;
  for (double S = 8; S <= (64 << 20); S *= 2) s.gather.push_back({S, predictAllGatherUs(ring, n, S)});
  for (double S = 256 << 10; S <= (64 << 20); S *= 2) {
    s.ring.push_back({S, predictRingAllReduceUs(ring, n, S, kChunk)});
    s.tree.push_back({S, predictTreeAllReduceUs(tree, n, S, kChunk)});
  }
  return s;
}

double percent(double predicted, double measured) {
  return 100.0 * (predicted - measured) / measured;
}

TEST(HeldOut, TheOnlySizeBeyondTheCacheIsNotJudgedByItsOwnFit) {
  const int n = 2;
  // The factor applies beyond cacheBytes / (4n) = 32 MiB: to 64 MiB only.
  ModelParams truth{7.5, 1.0 / 5000.0, 1.0 / 9000.0, 2.5, size_t{256} << 20};
  ModelParams tree = truth;
  tree.betaUsPerByte = 1.0 / 3000.0;
  const CalibrationSamples samples = exactSamples(truth, tree, n);
  const FitSetting setting{n, kChunk, truth.cacheBytes};
  const double S = 64 << 20;
  const double measured = samples.ring.back().us;
  ASSERT_EQ(samples.ring.back().bytes, S);

  const Calibration inSample = fitCalibration(samples, setting).model;
  EXPECT_NEAR(inSample.ring.memoryFactor, 2.5, 1e-6);
  EXPECT_NEAR(percent(predictRingAllReduceUs(inSample.ring, n, S, kChunk), measured), 0.0, 1e-6)
      << "fitted to this very point: 0% says nothing";

  // Without 64 MiB no size tells the factor: the model predicts the
  // in-cache speed, 2.5 times too fast for beta and gamma's share.
  const std::optional<double> held = heldOutPredictionUs(samples, setting, Fitted::Ring, S);
  ASSERT_TRUE(held.has_value());
  EXPECT_LT(percent(*held, measured), -40.0);
  EXPECT_GT(percent(*held, measured), -65.0);
}

TEST(HeldOut, AnExactModelPredictsEveryHeldOutSize) {
  const int n = 3;
  // Several sizes beyond the cache (from 8 MiB / 12): each one left out
  // is still predicted by the others.
  const ModelParams truth{7.5, 1.0 / 5000.0, 1.0 / 9000.0, 2.5, size_t{8} << 20};
  ModelParams tree = truth;
  tree.betaUsPerByte = 1.0 / 3000.0;
  const CalibrationSamples samples = exactSamples(truth, tree, n);
  const FitSetting setting{n, kChunk, truth.cacheBytes};
  for (const Sample& s : samples.ring) {
    const auto ring = heldOutPredictionUs(samples, setting, Fitted::Ring, s.bytes);
    ASSERT_TRUE(ring.has_value()) << s.bytes;
    EXPECT_NEAR(percent(*ring, s.us), 0.0, 0.01) << s.bytes;
  }
  for (const Sample& s : samples.tree) {
    const auto t = heldOutPredictionUs(samples, setting, Fitted::Tree, s.bytes);
    ASSERT_TRUE(t.has_value()) << s.bytes;
    EXPECT_NEAR(percent(*t, s.us), 0.0, 0.01) << s.bytes;
  }
  const auto gather = heldOutPredictionUs(samples, setting, Fitted::AllGather, 1 << 20);
  ASSERT_TRUE(gather.has_value());
  EXPECT_NEAR(percent(*gather, predictAllGatherUs(truth, n, 1 << 20)), 0.0, 0.01);
}

TEST(HeldOut, TooFewSizesLeftIsNotAnError) {
  // One all-reduce size: without it the ring has nothing to fit γ to.
  CalibrationSamples samples;
  samples.gather = {{1024, 10}, {4096, 20}, {1 << 20, 300}};
  samples.ring = {{1 << 20, 500}};
  samples.tree = {{1 << 20, 600}};
  const FitSetting setting{2, kChunk, size_t{8} << 20};
  EXPECT_NO_THROW(fitCalibration(samples, setting));
  EXPECT_FALSE(heldOutPredictionUs(samples, setting, Fitted::Ring, 1 << 20).has_value());
}

}  // namespace
}  // namespace coil_perf
