// How many ranks share the CPUs of this host: whether a waiting rank may
// poll with `pause` (it owns a core) or must hand its core over (ranks
// outnumber the cores they may run on).
//
// One process's affinity mask cannot tell. A launcher that binds each rank
// to its own core (mpirun's default --bind-to core for 2 ranks, srun's
// --cpu-bind) leaves every rank a mask of one CPU: counted alone, two ranks
// on two cores looked like two ranks on one, and coil yielded on every poll
// (8 B all-reduce 0.48 µs instead of 0.2). Two ranks bound to the same core
// really do share it. So the ranks on a host pool their masks: the CPUs of
// the union are the cores they share.
#pragma once

#include <cstdint>
#include <vector>

namespace coil {

/// Where one rank may run, as exchanged at init. Fixed size (masks of up
/// to 1024 CPUs, as glibc's cpu_set_t): it travels in a bootstrap allGather.
struct RankCpus {
  uint64_t hostHash;  // localHostHash(): same value, same host
  uint64_t mask[16];  // bit c: the rank may run on CPU c
};

/// This rank's host and affinity mask (all online CPUs when the mask
/// cannot be read).
RankCpus thisRankCpus();

struct CpuShare {
  int ranksHere = 1;  // ranks on this rank's host (this one included)
  int cpusHere = 1;   // CPUs in the union of their masks
  bool oversubscribed() const { return ranksHere > cpusHere; }
};

/// The share of this host's CPUs among its ranks, from every rank's
/// RankCpus (indexed by rank).
CpuShare cpuShare(const std::vector<RankCpus>& all, int rank);

}  // namespace coil
