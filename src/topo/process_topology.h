// This process's topology, learnt once, and where the calling thread's CPUs
// sit in it: what libcoil uses the topology for (thread binding,
// binding.h; shm placement, placement.h; ib NIC choice) starts here.
//
// Discovery runs at the first communicator init of the process (hwloc
// reads /sys: milliseconds), never at library load, and never again: the
// machine does not change under a running job, and a process with many
// communicators (splits, one per thread) must not pay it each time. Every
// init needs only the CPUs and the memory; the PCI devices, three times the
// work (topology.h, Scope), are learnt once too, but only where something
// asks for them (the ib transport's NIC choice).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topo/topology.h"

namespace coil::topo {

/// The CPUs and memory of this machine (Scope::CpusAndMemory), discovered
/// on the first call (thread safe). Never throws: when discovery fails, the
/// result has no NUMA nodes and `missing` says why, so coil runs on without
/// it.
const Topology& processTopology();
/// How long that first discovery took, in milliseconds.
double discoveryMilliseconds();
/// The same with the PCI devices as well (Scope::WithDevices; pciKnown
/// when hwloc is there), discovered on its own first call: a process that
/// asks for both (an ib rank with COIL_BIND=auto) reads its CPUs twice,
/// a few milliseconds once.
const Topology& processTopologyWithDevices();

/// The CPUs the calling thread may run on (its affinity mask), ascending;
/// empty when sched_getaffinity fails.
std::vector<unsigned> threadCpus();

/// The NUMA nodes (OS indexes, ascending) that hold any of `cpus`.
std::vector<unsigned> numaNodesOf(const Topology& topology, const std::vector<unsigned>& cpus);
/// The one NUMA node a rank running on `cpus` calls home: the node holding
/// most of them (the lowest on a tie); nullopt when the topology knows no
/// node holding any of them.
std::optional<unsigned> homeNode(const Topology& topology, const std::vector<unsigned>& cpus);

/// Where memory for `node` comes from: `node` itself, unless it is known to
/// have none (memoryBytes 0) and another node has some; then the nearest
/// of those by the distance matrix (the lowest on a tie, or without a
/// matrix), as the kernel serves a memoryless node's CPUs.
unsigned nearestNodeWithMemory(const Topology& topology, unsigned node);

/// The init line's text for a rank on `cpus`: "cpus 0-1, NUMA node 0; not
/// learnt: NUMA distances (...)".
std::string describeRankPlace(const Topology& topology, const std::vector<unsigned>& cpus);

}  // namespace coil::topo
