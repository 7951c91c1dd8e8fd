// How far apart two PCI devices are, in the words of `nvidia-smi topo -m`.
//
// Only the PCI tree and NUMA nodes are looked at (NVLink is not seen
// without NVIDIA's libraries). A PCIe switch appears in hwloc as an
// upstream-port bridge with one downstream-port bridge per slot, so two
// devices behind the same switch are one bridge away from their common
// bridge each: that is PIX here, as nvidia-smi calls it.
#pragma once

#include "topo/topology.h"

namespace coil::topo {

enum class PciPath {
  kSelf,  // X: the same device
  kPix,   // at most one PCIe switch (bridge) between them
  kPxb,   // several PCIe bridges, not the host bridge
  kPhb,   // through a PCIe host bridge (the CPU's root complex)
  kNode,  // through the links between host bridges of one NUMA node
  kSys,   // across NUMA nodes (QPI/UPI/Infinity Fabric), or the NUMA node is unknown
};

/// The path between two devices from where they sit.
PciPath pathBetween(const PciLocation& a, const PciLocation& b);

/// "X", "PIX", "PXB", "PHB", "NODE", "SYS".
const char* pathName(PciPath path);

/// One line explaining the name, for legends.
const char* pathMeaning(PciPath path);

}  // namespace coil::topo
