// coil-sim's cost numbers: a transport's own α-β-γ parameters (the ones the
// library's tuner uses for it), and the tuner's prediction for the whole call.
#pragma once

#include <optional>
#include <string>

#include "simulation.h"

namespace coil::sim {

/// The costs transport `name` states for itself (shm, tcp, ib: what this
/// build has) for the FIFO programs: on its caller-driven path where it has
/// one (tcp), else on its FIFOs. Throws std::invalid_argument for an
/// unknown transport.
CostParams transportCosts(const std::string& name);

/// The costs the tuner uses for the program `s` ran: the window's own
/// built-in ones for a window program, transport `name`'s one-shot costs for
/// the FIFO one-shot, else transportCosts(name).
CostParams algorithmCosts(const std::string& name, const Simulation& s);

/// The library's cost model (src/tune/tuner.cc) for this call with these
/// parameters, in µs; nothing when the model has no formula for it.
std::optional<double> tunerPredictionUs(const Simulation& s, const CostParams& params);

}  // namespace coil::sim
