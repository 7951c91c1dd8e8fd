// Which NIC of the topology an RDMA device belongs to.
//
// hwloc names a hardware device's verbs device under its PCI function
// ("mlx5_0" on 0000:3b:00.0); a software device (rxe) has no PCI function
// and is found through the interface it runs over ("rxe0" over "eth0").
#pragma once

#include <string>

#include "topo/ib_ports.h"
#include "topo/topology.h"

namespace coil::topo {

struct NicMatch {
  int nic = -1;     // index into Topology::nics; -1: none
  std::string how;  // "named by hwloc", "same PCI function", "over eth0"; "" when none
};

NicMatch nicOf(const Topology& topology, const IbDevice& device);

}  // namespace coil::topo
