// Which device, port and GID the ib transport takes: the rules alone, apart
// from the verbs calls that feed them (ib_device.cc), so that they are
// tested where no RDMA device exists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace coil::transport::ib {

/// COIL_IB_HCA, NCCL's syntax: a comma list of `name[:port]`; names match
/// as prefixes unless the list starts with `=`; a leading `^` inverts it.
/// "mlx5_0:1,mlx5_1", "=rxe1", "^mlx5_2". Empty: every device and port.
class HcaFilter {
 public:
  /// Throws coilInvalidUsage for a bad port number.
  static HcaFilter parse(const std::string& spec);
  bool admits(const std::string& device, int port) const;

 private:
  struct Entry {
    std::string name;
    int port = 0;  // 0: any
  };
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<Entry> entries_;
};

/// The order in which to try the RDMA devices, as indexes into `deviceNodes`
/// (the NUMA node of each device's PCI function, -1 unknown; in the order
/// ibv_get_device_list gives them). The first device with a usable port in
/// this order is taken. With COIL_IB_HCA set (`hcaSet`) it is the list's
/// order: the user chose, and their list is not second-guessed. Otherwise
/// the devices on the rank's NUMA node (`rankNode`; -1 unknown) come first,
/// so traffic does not cross the socket interconnect to reach the NIC; the
/// rest follow, each group in the list's order.
std::vector<size_t> deviceOrder(const std::vector<int>& deviceNodes, int rankNode, bool hcaSet);

bool isZeroGid(const uint8_t gid[16]);
bool isLinkLocalGid(const uint8_t gid[16]);     // fe80::/10
bool isIpv4MappedGid(const uint8_t gid[16]);    // ::ffff:a.b.c.d

/// What a RoCE GID is worth (higher is better), given its sysfs type
/// ("RoCE v2", "IB/RoCE v1"): 3 for RoCE v2 with an IPv4-mapped address
/// (routable, what RoCE fabrics are configured for), 2 for other RoCE v2,
/// 1 for v1; -1 for a zero or link-local GID (never used: link-local
/// addresses do not route between hosts).
int gidScore(const uint8_t gid[16], const std::string& type);

}  // namespace coil::transport::ib
