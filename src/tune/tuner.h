// Algorithm choice per call, from a cost model.
//
// Each algorithm's time is predicted with the α-β-γ model (docs/algorithms.md):
//   α  seconds per message (latency of one slot hand-off on the link)
//   β  seconds per byte moved over a link
//   γ  seconds per byte reduced
// The link parameters are those of the slowest transport the communicator
// uses. Defaults were measured on the reference machine with coil_perf; a
// user can override them (COIL_TUNE) or force an algorithm (COIL_ALGO).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "algorithms/fingerprint.h"

namespace coil::tune {

struct LinkModel {
  double alphaUs;      // per message
  double betaUsPerB;   // per byte over the link
  double gammaUsPerB;  // per byte reduced
};

/// Default model of a transport ("shm", "tcp"); COIL_TUNE=tcp:alpha=20,beta=0.0005
/// (µs and µs/byte) overrides fields.
LinkModel linkModel(const std::string& transport);

struct Prediction {
  std::string algorithm;
  double microseconds;
};

/// The algorithms coil has for a collective, in preference order for ties.
const std::vector<std::string>& algorithmsFor(algo::CollKind kind);

/// Predicted time of `algorithm` for a call moving `bytes` (the per-rank
/// buffer; for all-gather/reduce-scatter the per-rank block × n) on n ranks
/// with chunks of chunkBytes.
double predictUs(algo::CollKind kind, const std::string& algorithm, size_t bytes, int nranks,
                 size_t chunkBytes, const LinkModel& m);

/// COIL_ALGO parsed once per communicator: "ring" (every collective that has
/// it) or "allreduce:tree,broadcast:ring". Throws coilInvalidUsage naming a
/// bad entry.
class AlgorithmOverride {
 public:
  explicit AlgorithmOverride(const std::string& spec = "");
  /// The forced algorithm for `kind`, or "" for the model's choice.
  std::string forced(algo::CollKind kind) const;

 private:
  std::string all_;
  std::map<algo::CollKind, std::string> per_;
};

/// Chooses an algorithm: the forced one, else the lowest prediction.
/// `predictions` receives every candidate's cost (for INFO logging).
std::string choose(algo::CollKind kind, size_t bytes, int nranks, size_t chunkBytes,
                   const LinkModel& m, const AlgorithmOverride& forced,
                   std::vector<Prediction>* predictions);

}  // namespace coil::tune
