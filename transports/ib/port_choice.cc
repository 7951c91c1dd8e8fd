#include "transports/ib/port_choice.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace coil::transport::ib {

HcaFilter HcaFilter::parse(const std::string& spec) {
  HcaFilter f;
  size_t i = 0;
  if (i < spec.size() && spec[i] == '^') f.exclude_ = true, ++i;
  if (i < spec.size() && spec[i] == '=') f.exact_ = true, ++i;
  std::stringstream in(spec.substr(i));
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    Entry e;
    const size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      char* end = nullptr;
      const long port = std::strtol(item.c_str() + colon + 1, &end, 10);
      if (colon + 1 == item.size() || *end != '\0' || port < 1 || port > 255)
        fail(coilInvalidUsage, "COIL_IB_HCA=", spec, ": bad port in '", item,
             "' (expected name or name:port, port 1-255)");
      e.port = static_cast<int>(port);
    }
    f.entries_.push_back(e);
  }
  return f;
}

bool HcaFilter::admits(const std::string& device, int port) const {
  if (entries_.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries_) {
    const bool name = exact_ ? device == e.name : device.rfind(e.name, 0) == 0;
    listed = listed || (name && (e.port == 0 || e.port == port));
  }
  return exclude_ ? !listed : listed;
}

std::vector<size_t> deviceOrder(const std::vector<int>& deviceNodes, int rankNode, bool hcaSet) {
  std::vector<size_t> order(deviceNodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (hcaSet || rankNode < 0) return order;
  std::stable_partition(order.begin(), order.end(),
                        [&](size_t i) { return deviceNodes[i] == rankNode; });
  return order;
}

bool isZeroGid(const uint8_t gid[16]) {
  for (int i = 0; i < 16; ++i)
    if (gid[i] != 0) return false;
  return true;
}

bool isLinkLocalGid(const uint8_t gid[16]) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

bool isIpv4MappedGid(const uint8_t gid[16]) {
  for (int i = 0; i < 10; ++i)
    if (gid[i] != 0) return false;
  return gid[10] == 0xff && gid[11] == 0xff;
}

int gidScore(const uint8_t gid[16], const std::string& type) {
  if (isZeroGid(gid) || isLinkLocalGid(gid)) return -1;
  const bool v2 = type.find("v2") != std::string::npos;
  if (v2 && isIpv4MappedGid(gid)) return 3;
  return v2 ? 2 : 1;
}

}  // namespace coil::transport::ib
