// coil-sim's text output: the step table, the replayed values, the costs.
#pragma once

#include <cstdio>
#include <optional>

#include "simulation.h"

namespace coil::sim {

/// "Ring all-reduce (ringAllReduce): 4 ranks, 8 elements, chunk 3 elements"
/// and the algorithm's one-line summary.
void printHeader(std::FILE* out, const Simulation& s);

/// One row per step, one column per rank: the primitive each rank ran in
/// that step (blank: it waited). With `costs`, each row ends in its α, β
/// and γ terms.
void printSteps(std::FILE* out, const Simulation& s, const std::vector<RoundCost>* costs);

/// After each step, which ranks' inputs every output element holds.
void printValues(std::FILE* out, const Simulation& s);

/// The per-step costs summed, beside the tuner's formula for the call.
void printCostSummary(std::FILE* out, const Simulation& s, const std::vector<RoundCost>& costs,
                      const CostParams& params, std::optional<double> tunerUs);

/// Whether the run ended as the collective's definition says; false (and
/// what went wrong on `out`) for a deadlock or a wrong element.
bool printVerdict(std::FILE* out, const Simulation& s);

}  // namespace coil::sim
