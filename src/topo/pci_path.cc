#include "topo/pci_path.h"

#include <algorithm>

namespace coil::topo {

PciPath pathBetween(const PciLocation& a, const PciLocation& b) {
  if (!a.busId.empty() && a.busId == b.busId) return PciPath::kSelf;
  const bool sameNode = a.numaNode >= 0 && a.numaNode == b.numaNode;
  if (a.numaNode >= 0 && b.numaNode >= 0 && !sameNode) return PciPath::kSys;
  // The bridges both devices hang from; bridges[0] is their host bridge.
  const size_t shared = static_cast<size_t>(
      std::mismatch(a.bridges.begin(), a.bridges.end(), b.bridges.begin(), b.bridges.end()).first -
      a.bridges.begin());
  if (shared == 0) return sameNode ? PciPath::kNode : PciPath::kSys;
  if (shared == 1) return PciPath::kPhb;
  const size_t belowA = a.bridges.size() - shared, belowB = b.bridges.size() - shared;
  return belowA <= 1 && belowB <= 1 ? PciPath::kPix : PciPath::kPxb;
}

namespace {

struct PathText {
  const char* name;
  const char* meaning;
};

// By PciPath, in its order.
const PathText& textOf(PciPath path) {
  static const PathText kText[] = {
      {"X", "the same device"},
      {"PIX", "through at most one PCIe switch (bridge)"},
      {"PXB", "through several PCIe bridges, without the host bridge"},
      {"PHB", "through a PCIe host bridge (typically the CPU)"},
      {"NODE", "through the links between PCIe host bridges of one NUMA node"},
      {"SYS", "across NUMA nodes (the SMP interconnect), or a NUMA node unknown"},
  };
  return kText[static_cast<int>(path)];
}

}  // namespace

const char* pathName(PciPath path) { return textOf(path).name; }

const char* pathMeaning(PciPath path) { return textOf(path).meaning; }

}  // namespace coil::topo
