// coil-sim's pictures of a Simulation (simulation.h).
#pragma once

#include <string>
#include <vector>

#include "simulation.h"

namespace coil::sim {

/// A space-time diagram as one SVG document: ranks are rows, rounds are
/// columns, each message an arrow from its sender's round to its
/// receiver's, labelled with its span; a cell's colour says how much of
/// the collective's result the rank's output holds after that round.
std::string renderSvg(const Simulation& s);

/// One self-contained HTML page (no network access) that steps through the
/// run: next / previous / play; each step shows every rank's buffer and the
/// messages in flight; `costs` (one per round) are shown per step and in total.
std::string renderHtml(const Simulation& s, const std::vector<RoundCost>& costs,
                       const CostParams& params);

}  // namespace coil::sim
