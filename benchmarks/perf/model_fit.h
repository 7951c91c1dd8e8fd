// Fitting the α-β-γ model (predict.h) to measured times, and the
// calibration file that carries the result (read by coil through
// COIL_TUNE_FILE):
//
//   # coil calibration, <date>, <host>, nranks=<n>
//   shm alpha_us=<float> beta_us_per_byte=<float> gamma_us_per_byte=<float>
//
// One line per transport; lines starting with # are comments.
//
// The fits minimise the squared RELATIVE error, sum(((t - model) / t)^2),
// i.e. least squares with weights 1/t^2. Over a geometric size sweep that
// lets the small sizes (where t is nearly all α) and the large ones (nearly
// all β, γ) count alike; a plain least-squares fit would be decided by the
// few largest times alone and could leave α negative.
#pragma once

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

/// γ from ring all-reduce times with α and β known, fitting
/// T = 2(n-1)·rounds·α + 2(n-1)/n·S·β + (n-1)/n·S·γ (rounds as predict.h,
/// from `chunkBytes`); clamped to >= 0. `unclamped`, if given, receives
/// the least-squares value before the clamp (negative when α and β alone
/// already predict more than the measured times). Throws
/// std::invalid_argument without samples.
double fitRingGamma(const std::vector<Sample>& samples, int nranks, const ModelParams& alphaBeta,
                    size_t chunkBytes, double* unclamped = nullptr);

/// "shm alpha_us=... beta_us_per_byte=... gamma_us_per_byte=..." (no newline).
std::string calibrationLine(const std::string& transport, const ModelParams& m);

/// Writes `m` as the line of `transport` to `path`, preceded by the
/// "# coil calibration, ..." comment. Lines of other transports already in
/// the file (with the comment line right before each) are kept, so one file
/// can hold shm and tcp. Throws std::runtime_error naming the path.
void writeCalibrationFile(const std::string& path, const std::string& transport,
                          const ModelParams& m, int nranks, const std::string& host,
                          const std::string& date);

/// The parameters of `transport` in the calibration file at `path`. Throws
/// std::runtime_error naming the path and line if it cannot be read, has
/// no line for `transport`, or a line is malformed.
ModelParams readCalibrationFile(const std::string& path, const std::string& transport);

}  // namespace coil_perf
