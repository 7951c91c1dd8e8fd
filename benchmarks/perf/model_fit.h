// Fitting the α-β-γ model (predict.h) to measured times, and the
// calibration file that carries the result (read by coil through
// COIL_TUNE_FILE):
//
//   # coil calibration, <date>, <host>, nranks=<n>
//   shm alpha_us=<float> beta_us_per_byte=<float> gamma_us_per_byte=<float> memory_factor=<float>
//   shm/tree beta_us_per_byte=<float>
//
// Per transport a line for its FIFO algorithms and, when the tree was timed,
// one with the tree's own β; lines starting with # are comments. coil reads
// the same file through COIL_TUNE_FILE (src/tune/tuner.h).
//
// The fits minimise the squared RELATIVE error, sum(((t - model) / t)^2),
// i.e. least squares with weights 1/t^2. Over a geometric size sweep that
// lets the small sizes (where t is nearly all α) and the large ones (nearly
// all β, γ) count alike; a plain least-squares fit would be decided by the
// few largest times alone and could leave α negative.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "predict.h"

namespace coil_perf {

/// One measured size: bytes of the operation and its time.
struct Sample {
  double bytes = 0;
  double us = 0;
};

/// α and β from all-gather times, fitting T = (n-1)·α + (n-1)/n·S·β (needs
/// n >= 2 and two samples of different size; throws std::invalid_argument
/// otherwise). A negative solution for one parameter is clamped to 0 and
/// the other refitted alone. gamma is left 0.
ModelParams fitAllGather(const std::vector<Sample>& samples, int nranks);

/// Predicted µs of one collective for parameters `m`, `bytes` per rank
/// (predict.h's functions with n and chunk bound).
using Predictor = std::function<double(const ModelParams& m, double bytes)>;

/// The memory factor (ModelParams::memoryFactor) from the times of sizes
/// beyond the cache (memoryScale; the others are skipped), with α, β and γ
/// fitted to sizes within it: T = fixed + factor·scalable, where `predict`
/// with β = γ = 0 gives the fixed part. 1 when no sample is beyond the cache
/// or `m.cacheBytes` is 0; at least 0.
double fitMemoryFactor(const std::vector<Sample>& samples, int nranks, const ModelParams& m,
                       const Predictor& predict);

/// The tree's own β from tree all-reduce times with α, γ and the memory
/// factor known (predictTreeAllReduceUs): what α and γ leave is L·S·β·k.
/// Clamped to >= 0; throws std::invalid_argument without samples.
double fitTreeBeta(const std::vector<Sample>& samples, int nranks, const ModelParams& m,
                   size_t chunkBytes);

/// γ from ring all-reduce times with α and β known, fitting
/// T = 2(n-1)·rounds·α + 2(n-1)/n·S·β + (n-1)/n·S·γ (rounds as predict.h,
/// from `chunkBytes`); clamped to >= 0. `unclamped`, if given, receives
/// the least-squares value before the clamp (negative when α and β alone
/// already predict more than the measured times). Throws
/// std::invalid_argument without samples.
double fitRingGamma(const std::vector<Sample>& samples, int nranks, const ModelParams& alphaBeta,
                    size_t chunkBytes, double* unclamped = nullptr);

/// The file's lines for `transport` (no trailing newline): "shm alpha_us=...
/// memory_factor=...", then "shm/tree beta_us_per_byte=..." when the tree's
/// β differs from the ring's.
std::string calibrationLines(const std::string& transport, const Calibration& c);

/// Writes `c` as the lines of `transport` to `path`, preceded by the
/// "# coil calibration, ..." comment. Lines of other transports already in
/// the file (with the comment line right before each) are kept, so one file
/// can hold shm and tcp. Throws std::runtime_error naming the path.
void writeCalibrationFile(const std::string& path, const std::string& transport,
                          const Calibration& c, int nranks, const std::string& host,
                          const std::string& date);

/// The parameters of `transport` in the calibration file at `path` (the
/// tree's are the ring's unless a "T/tree" line changes them; cacheBytes is
/// left 0). Throws std::runtime_error naming the path and line if it cannot
/// be read, has no line for `transport`, or a line is malformed.
Calibration readCalibrationFile(const std::string& path, const std::string& transport);

}  // namespace coil_perf
