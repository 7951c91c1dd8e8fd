// The ranks of a communicator must choose the same algorithm for every call,
// or their schedules do not meet. Each rank builds its cost model from what
// it sees (its host's cache, its environment, its COIL_TUNE_FILE), and those
// may differ between hosts; so at init every rank adopts rank 0's parameters.
// COIL_ALGO is a user's explicit choice: ranks that disagree on it fail.
#pragma once

#include <string>

#include "bootstrap/bootstrap.h"
#include "tune/tuner.h"

namespace coil {

/// Collective over `bootstrap`: replaces `model`'s parameters with rank 0's
/// (logging a warning on a rank whose own differ) and fails with
/// coilInvalidUsage, naming both values, when COIL_ALGO (`algoSpec`)
/// differs between ranks.
void agreeOnModel(Bootstrap& bootstrap, int rank, int nranks, const std::string& algoSpec,
                  tune::Model& model);

}  // namespace coil
