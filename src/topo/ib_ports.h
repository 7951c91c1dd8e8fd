// RDMA (verbs) devices and their ports, as the kernel shows them under
// /sys/class/infiniband/<device>/ports/<n>/: state, link layer, active MTU
// and the GID table with each entry's type (RoCE v1/v2) and interface.
//
// Read from files rather than through libibverbs so that it runs where
// rdma-core is not installed and can be tested on a fake tree; the ib
// transport asks verbs itself (transports/ib/ib_device.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace coil::topo {

struct IbGid {
  int index = 0;
  std::string address;    // as sysfs writes it: "fe80:0000:0000:0000:0000:00ff:fe00:0001"
  std::string type;       // "RoCE v2", "IB/RoCE v1"; "" when sysfs gives none (InfiniBand ports)
  std::string netDevice;  // the interface a RoCE GID belongs to ("eth0"); "" if none
};

struct IbPort {
  int number = 0;
  std::string state;      // "ACTIVE", "DOWN", ... (sysfs "4: ACTIVE" without the number)
  std::string physState;  // "LinkUp", "Disabled", ...
  std::string linkLayer;  // "Ethernet" (RoCE) or "InfiniBand"
  std::string rate;       // "100 Gb/sec (4X EDR)"
  /// Active MTU in bytes. sysfs has no such file: for RoCE it is derived
  /// from the interface's MTU as the kernel does; for InfiniBand it stays
  /// unknown (ibv_devinfo shows it). `mtuNote` says which.
  std::optional<int> activeMtu;
  std::string mtuNote;
  std::vector<IbGid> gids;  // the table's non-empty entries, by index
};

struct IbDevice {
  std::string name;      // "mlx5_0", "rxe0"
  std::string pciBusId;  // its PCI function ("0000:3b:00.0"); "" for a software device (rxe)
  std::string parent;    // rxe: the interface it runs over ("eth0"); "" otherwise
  std::vector<IbPort> ports;
};

struct IbScan {
  std::string directory;          // <sysRoot>/class/infiniband
  bool directoryExists = false;   // false: no RDMA driver loaded at all
  std::vector<IbDevice> devices;  // by name
};

/// Every device under <sysRoot>/class/infiniband. Unreadable files leave
/// their field empty; never throws.
IbScan readIbDevices(const std::string& sysRoot = "/sys");

/// The RoCE active MTU (256..4096 bytes) for an interface MTU, as the
/// kernel derives it: the largest IB MTU not above the interface's MTU
/// less `headerBytes` of headers (hardware RoCE drivers: 96,
/// iboe_get_mtu; rxe: 80). nullopt when even 256 does not fit.
std::optional<int> roceMtu(int interfaceMtu, int headerBytes);

}  // namespace coil::topo
