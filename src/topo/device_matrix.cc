#include "topo/device_matrix.h"

namespace coil::topo {

std::string nicName(const Nic& nic) {
  if (!nic.interfaces.empty()) return nic.interfaces.front();
  if (!nic.ibDevices.empty()) return nic.ibDevices.front();
  return nic.where.busId;
}

DeviceMatrix deviceMatrix(const Topology& topology) {
  DeviceMatrix m;
  for (size_t i = 0; i < topology.gpus.size(); ++i)
    m.devices.push_back(
        {"GPU" + std::to_string(i), topology.gpus[i].where.busId, topology.gpus[i].where});
  for (size_t i = 0; i < topology.nics.size(); ++i)
    m.devices.push_back(
        {"NIC" + std::to_string(i), nicName(topology.nics[i]), topology.nics[i].where});
  for (const MatrixDevice& row : m.devices)
    for (const MatrixDevice& column : m.devices)
      m.paths.push_back(&row == &column ? PciPath::kSelf : pathBetween(row.where, column.where));
  return m;
}

}  // namespace coil::topo
