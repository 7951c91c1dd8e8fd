// Which NIC an RDMA device belongs to: by hwloc's name, by PCI bus id, or
// by the interface a software device runs over.
#include "topo/ib_nic_match.h"

#include <gtest/gtest.h>

namespace coil::topo {
namespace {

Topology twoNics() {
  Topology t;
  t.pciKnown = true;
  Nic mellanox;
  mellanox.where.busId = "0000:1b:00.0";
  mellanox.interfaces = {"ens1f0np0"};
  mellanox.ibDevices = {"mlx5_0"};
  Nic intel;
  intel.where.busId = "0000:ca:00.0";
  intel.interfaces = {"ens2"};
  t.nics = {mellanox, intel};
  return t;
}

IbDevice device(std::string name, std::string busId, std::string parent, std::string gidDev = "") {
  IbDevice d{std::move(name), std::move(busId), std::move(parent), {}};
  if (!gidDev.empty())
    d.ports.push_back(IbPort{1, "", "", "", "", {}, "", {IbGid{0, "fe80::", "", gidDev}}});
  return d;
}

TEST(IbNicMatch, ByHwlocName) {
  const NicMatch m = nicOf(twoNics(), device("mlx5_0", "", ""));
  EXPECT_EQ(m.nic, 0);
  EXPECT_EQ(m.how, "named by hwloc");
}

TEST(IbNicMatch, ByPciBusId) {
  const NicMatch m = nicOf(twoNics(), device("irdma0", "0000:ca:00.0", ""));
  EXPECT_EQ(m.nic, 1);
  EXPECT_EQ(m.how, "same PCI function");
}

TEST(IbNicMatch, SoftwareDeviceByParentOrGidInterface) {
  NicMatch m = nicOf(twoNics(), device("rxe0", "", "ens2"));
  EXPECT_EQ(m.nic, 1);
  EXPECT_EQ(m.how, "over ens2");
  m = nicOf(twoNics(), device("rxe1", "", "", "ens1f0np0"));
  EXPECT_EQ(m.nic, 0);
  EXPECT_EQ(m.how, "over ens1f0np0");
}

TEST(IbNicMatch, NoneWhenNothingFits) {
  const NicMatch m = nicOf(twoNics(), device("rxe9", "", "veth0", "veth0"));
  EXPECT_EQ(m.nic, -1);
  EXPECT_EQ(m.how, "");
  EXPECT_EQ(nicOf(Topology{}, device("mlx5_0", "0000:1b:00.0", "")).nic, -1);
}

}  // namespace
}  // namespace coil::topo
