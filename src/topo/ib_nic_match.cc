#include "topo/ib_nic_match.h"

#include <algorithm>

namespace coil::topo {
namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return !name.empty() && std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

NicMatch nicOf(const Topology& topology, const IbDevice& device) {
  const auto& nics = topology.nics;
  for (size_t i = 0; i < nics.size(); ++i)
    if (contains(nics[i].ibDevices, device.name)) return {static_cast<int>(i), "named by hwloc"};
  for (size_t i = 0; i < nics.size(); ++i)
    if (!device.pciBusId.empty() && nics[i].where.busId == device.pciBusId)
      return {static_cast<int>(i), "same PCI function"};
  // The interfaces the device's GIDs belong to, its parent first.
  std::vector<std::string> over;
  if (!device.parent.empty()) over.push_back(device.parent);
  for (const IbPort& port : device.ports)
    for (const IbGid& gid : port.gids)
      if (!gid.netDevice.empty() && !contains(over, gid.netDevice)) over.push_back(gid.netDevice);
  for (const std::string& interface : over)
    for (size_t i = 0; i < nics.size(); ++i)
      if (contains(nics[i].interfaces, interface))
        return {static_cast<int>(i), "over " + interface};
  return {};
}

}  // namespace coil::topo
