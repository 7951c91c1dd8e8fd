// coil-topo --comm: under a launcher, which transport coil chose between
// every pair of ranks, and why (the more preferred transports it passed
// over, with their reasons).
#pragma once

namespace coil::topo {

/// Joins a communicator from the launcher's environment
/// (coilCommInitFromEnv), gathers every rank's view of its links, and
/// prints the matrix and the reasons on rank 0. Returns the exit status.
int printCommReport();

}  // namespace coil::topo
