#include "topo/ib_ports.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace coil::topo {
namespace {

namespace fs = std::filesystem;

std::string firstLine(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (in) std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

// "4: ACTIVE" -> "ACTIVE".
std::string withoutCode(const std::string& text) {
  const size_t colon = text.find(": ");
  return colon == std::string::npos ? text : text.substr(colon + 2);
}

bool isNumber(const std::string& s) {
  return !s.empty() && s.size() < 9 && s.find_first_not_of("0123456789") == std::string::npos;
}

// The numeric entries of a directory ("1", "2", ... for ports and GIDs), ascending.
std::vector<int> numberedEntries(const fs::path& dir) {
  std::vector<int> numbers;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (isNumber(name)) numbers.push_back(std::stoi(name));
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

bool isEmptyGid(const std::string& address) {
  return address.find_first_not_of("0:") == std::string::npos;
}

std::vector<IbGid> readGids(const fs::path& port) {
  std::vector<IbGid> gids;
  for (int i : numberedEntries(port / "gids")) {
    const std::string index = std::to_string(i);
    const std::string address = firstLine(port / "gids" / index);
    // Unused entries read as zeros (and their type file fails with EINVAL).
    if (isEmptyGid(address)) continue;
    gids.push_back({i, address, firstLine(port / "gid_attrs/types" / index),
                    firstLine(port / "gid_attrs/ndevs" / index)});
  }
  return gids;
}

void deriveMtu(const std::string& sysRoot, const IbDevice& device, IbPort& port) {
  if (port.linkLayer != "Ethernet") {
    port.mtuNote = "not in sysfs for an InfiniBand port (ibv_devinfo shows it)";
    return;
  }
  std::string interface = device.parent;
  for (const IbGid& g : port.gids)
    if (interface.empty()) interface = g.netDevice;
  if (interface.empty()) {
    port.mtuNote = "unknown: no interface named for this RoCE port";
    return;
  }
  const std::string text = firstLine(fs::path(sysRoot) / "class/net" / interface / "mtu");
  if (!isNumber(text)) {
    port.mtuNote = "unknown: cannot read " + interface + "'s MTU";
    return;
  }
  // rxe counts its own headers (RXE_MAX_HDR_LENGTH); hardware drivers use
  // the kernel's iboe_get_mtu.
  const bool softRoce = !device.parent.empty();
  port.activeMtu = roceMtu(std::stoi(text), softRoce ? 80 : 96);
  port.mtuNote = "from " + interface + "'s MTU " + text;
}

}  // namespace

std::optional<int> roceMtu(int interfaceMtu, int headerBytes) {
  const int payload = interfaceMtu - headerBytes;
  for (int mtu = 4096; mtu >= 256; mtu /= 2)
    if (payload >= mtu) return mtu;
  return std::nullopt;
}

IbScan readIbDevices(const std::string& sysRoot) {
  IbScan scan;
  const fs::path dir = fs::path(sysRoot) / "class/infiniband";
  scan.directory = dir.string();
  std::error_code ec;
  scan.directoryExists = fs::is_directory(dir, ec);
  if (!scan.directoryExists) return scan;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const fs::path devDir = entry.path();
    IbDevice device;
    device.name = devDir.filename().string();
    // A PCI device links to its function ("../../../0000:3b:00.0"); a
    // software device (rxe) has no such link.
    const fs::path link = fs::read_symlink(devDir / "device", ec);
    if (!ec) device.pciBusId = link.filename().string();
    device.parent = firstLine(devDir / "parent");
    for (int n : numberedEntries(devDir / "ports")) {
      const fs::path p = devDir / "ports" / std::to_string(n);
      IbPort port;
      port.number = n;
      port.state = withoutCode(firstLine(p / "state"));
      port.physState = withoutCode(firstLine(p / "phys_state"));
      port.linkLayer = firstLine(p / "link_layer");
      port.rate = firstLine(p / "rate");
      port.gids = readGids(p);
      deriveMtu(sysRoot, device, port);
      device.ports.push_back(std::move(port));
    }
    scan.devices.push_back(std::move(device));
  }
  std::sort(scan.devices.begin(), scan.devices.end(),
            [](const IbDevice& a, const IbDevice& b) { return a.name < b.name; });
  return scan;
}

}  // namespace coil::topo
