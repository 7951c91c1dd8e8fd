// The part of the topology Linux's /sys gives without hwloc: PUs, packages,
// cores and NUMA nodes. What discover() falls back to when coil was built
// without hwloc (topology_absent.cc); a function of its own, with the root
// as a parameter, so that it is built and tested whether or not hwloc is.
#pragma once

#include <string>

#include "topo/topology.h"

namespace coil::topo {

/// Reads <sysRoot>/devices/system/{cpu,node}. Leaves hostName, l3Caches,
/// PCI devices and NUMA distances empty and names them in `missing`
/// (pciKnown stays false). Throws coil::Error when not even the online
/// CPUs can be read.
Topology minimalFromSysfs(const std::string& sysRoot);

}  // namespace coil::topo
