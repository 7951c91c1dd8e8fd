// The GPUs and NICs of a topology, each against each, as `nvidia-smi topo -m`
// shows them: GPUs first (GPU0, GPU1, ...), then NICs (NIC0, ...), in the
// order hwloc lists them (PCI bus order).
#pragma once

#include <string>
#include <vector>

#include "topo/pci_path.h"
#include "topo/topology.h"

namespace coil::topo {

struct MatrixDevice {
  std::string label;  // "GPU0", "NIC1"
  std::string name;   // what it is: "0000:3b:00.0", "eth0", "mlx5_0"
  PciLocation where;
};

struct DeviceMatrix {
  std::vector<MatrixDevice> devices;
  std::vector<PciPath> paths;  // row-major, devices.size() squared
  PciPath at(size_t row, size_t column) const { return paths[row * devices.size() + column]; }
};

DeviceMatrix deviceMatrix(const Topology& topology);

/// What a NIC is called: its first interface, else its first verbs
/// device, else its bus id.
std::string nicName(const Nic& nic);

}  // namespace coil::topo
