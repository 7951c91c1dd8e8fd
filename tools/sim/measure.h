// coil-sim --measure: the simulated call on the real engine, ranks as
// threads of this process, with COIL_ALGO forcing the simulated algorithm.
#pragma once

#include <string>

#include "simulation.h"

namespace coil::sim {

struct Measurement {
  bool ran = false;
  std::string why;       // when it did not run
  double microseconds = 0;  // mean time of one call on rank 0
  int iterations = 0;
};

/// Runs `iterations` calls (after a few warm-ups) over `transport`.
Measurement measure(const Simulation& s, const std::string& transport, int iterations);

}  // namespace coil::sim
