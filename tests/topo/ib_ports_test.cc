// The RDMA port reader on fake /sys trees: a Soft-RoCE device (rxe0 over
// eth0, as tests/rxe's guest has), a hardware InfiniBand port, a RoCE port
// on a jumbo-frame interface, and no devices at all.
#include "topo/ib_ports.h"

#include <gtest/gtest.h>

#include "fake_tree.h"

namespace coil::topo {
namespace {

using test::FakeTree;

constexpr const char* kLinkLocal = "fe80:0000:0000:0000:0000:00ff:fe00:0001";
constexpr const char* kIpv4Mapped = "0000:0000:0000:0000:0000:ffff:0a00:0001";
constexpr const char* kEmpty = "0000:0000:0000:0000:0000:0000:0000:0000";

// rxe0 over eth0 (MTU 1500): four GIDs set (v1 and v2 of a link-local and
// of 10.0.0.1), the rest of the table empty.
void writeRxe(const FakeTree& t) {
  const std::string dev = "class/infiniband/rxe0/";
  const std::string port = dev + "ports/1/";
  t.write(dev + "parent", "eth0");
  t.write(port + "state", "4: ACTIVE");
  t.write(port + "phys_state", "5: LinkUp");
  t.write(port + "link_layer", "Ethernet");
  t.write(port + "rate", "10 Gb/sec (1X QDR)");
  const char* addresses[] = {kLinkLocal, kLinkLocal, kIpv4Mapped, kIpv4Mapped, kEmpty, kEmpty};
  const char* types[] = {"IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"};
  for (int i = 0; i < 6; ++i) {
    t.write(port + "gids/" + std::to_string(i), addresses[i]);
    if (i < 4) {
      t.write(port + "gid_attrs/types/" + std::to_string(i), types[i]);
      t.write(port + "gid_attrs/ndevs/" + std::to_string(i), "eth0");
    }
  }
  t.write("class/net/eth0/mtu", "1500");
}

TEST(IbPorts, SoftRoceDeviceOverEth0) {
  FakeTree t;
  writeRxe(t);
  const IbScan scan = readIbDevices(t.root());
  EXPECT_TRUE(scan.directoryExists);
  EXPECT_EQ(scan.directory, t.root() + "/class/infiniband");
  ASSERT_EQ(scan.devices.size(), 1u);
  const IbDevice& d = scan.devices[0];
  EXPECT_EQ(d.name, "rxe0");
  EXPECT_EQ(d.pciBusId, "") << "software device: no PCI function";
  EXPECT_EQ(d.parent, "eth0");
  ASSERT_EQ(d.ports.size(), 1u);
  const IbPort& p = d.ports[0];
  EXPECT_EQ(p.number, 1);
  EXPECT_EQ(p.state, "ACTIVE");
  EXPECT_EQ(p.physState, "LinkUp");
  EXPECT_EQ(p.linkLayer, "Ethernet");
  EXPECT_EQ(p.rate, "10 Gb/sec (1X QDR)");
  ASSERT_TRUE(p.activeMtu.has_value());
  EXPECT_EQ(*p.activeMtu, 1024) << "1500 less rxe's 80 bytes of headers";
  EXPECT_EQ(p.mtuNote, "from eth0's MTU 1500");
  ASSERT_EQ(p.gids.size(), 4u) << "empty entries left out";
  EXPECT_EQ(p.gids[0].index, 0);
  EXPECT_EQ(p.gids[0].address, kLinkLocal);
  EXPECT_EQ(p.gids[0].type, "IB/RoCE v1");
  EXPECT_EQ(p.gids[0].netDevice, "eth0");
  EXPECT_EQ(p.gids[1].type, "RoCE v2");
  EXPECT_EQ(p.gids[3].index, 3);
  EXPECT_EQ(p.gids[3].address, kIpv4Mapped);
  EXPECT_EQ(p.gids[3].type, "RoCE v2");
}

TEST(IbPorts, HardwareInfiniBandPortAndPortOrder) {
  FakeTree t;
  const std::string dev = "class/infiniband/mlx5_0/";
  t.symlink("../../../0000:1b:00.0", dev + "device");
  for (int n : {2, 1, 10}) {  // listed out of order on purpose
    const std::string port = dev + "ports/" + std::to_string(n) + "/";
    t.write(port + "state", n == 1 ? "4: ACTIVE" : "1: DOWN");
    t.write(port + "link_layer", "InfiniBand");
    t.write(port + "gids/0", n == 1 ? "fe80:0000:0000:0000:b83f:d203:0000:0001" : kEmpty);
  }
  const IbScan scan = readIbDevices(t.root());
  ASSERT_EQ(scan.devices.size(), 1u);
  const IbDevice& d = scan.devices[0];
  EXPECT_EQ(d.pciBusId, "0000:1b:00.0");
  EXPECT_EQ(d.parent, "");
  ASSERT_EQ(d.ports.size(), 3u);
  EXPECT_EQ(d.ports[0].number, 1);
  EXPECT_EQ(d.ports[1].number, 2);
  EXPECT_EQ(d.ports[2].number, 10);
  EXPECT_EQ(d.ports[0].state, "ACTIVE");
  EXPECT_EQ(d.ports[1].state, "DOWN");
  EXPECT_EQ(d.ports[0].physState, "") << "file absent: field empty";
  ASSERT_EQ(d.ports[0].gids.size(), 1u);
  EXPECT_EQ(d.ports[0].gids[0].type, "") << "InfiniBand GIDs have no RoCE type";
  EXPECT_TRUE(d.ports[1].gids.empty());
  EXPECT_FALSE(d.ports[0].activeMtu) << "sysfs has no active MTU for InfiniBand";
  EXPECT_NE(d.ports[0].mtuNote.find("ibv_devinfo"), std::string::npos) << d.ports[0].mtuNote;
}

TEST(IbPorts, HardwareRoceMtuFromTheInterface) {
  FakeTree t;
  const std::string port = "class/infiniband/mlx5_1/ports/1/";
  t.symlink("../../../0000:1b:00.1", "class/infiniband/mlx5_1/device");
  t.write(port + "link_layer", "Ethernet");
  t.write(port + "gids/0", kLinkLocal);
  t.write(port + "gid_attrs/types/0", "RoCE v2");
  t.write(port + "gid_attrs/ndevs/0", "ens1f1np1");
  t.write("class/net/ens1f1np1/mtu", "4180");
  const IbScan scan = readIbDevices(t.root());
  ASSERT_EQ(scan.devices.size(), 1u);
  const IbPort& p = scan.devices[0].ports.at(0);
  ASSERT_TRUE(p.activeMtu);
  EXPECT_EQ(*p.activeMtu, 2048) << "hardware RoCE counts 96 bytes of headers (iboe_get_mtu)";
  EXPECT_EQ(p.mtuNote, "from ens1f1np1's MTU 4180");
}

TEST(IbPorts, RoceWithoutInterfaceSaysSo) {
  FakeTree t;
  t.write("class/infiniband/x0/ports/1/link_layer", "Ethernet");
  const IbScan scan = readIbDevices(t.root());
  ASSERT_EQ(scan.devices.size(), 1u);
  EXPECT_FALSE(scan.devices[0].ports.at(0).activeMtu);
  EXPECT_NE(scan.devices[0].ports[0].mtuNote.find("no interface"), std::string::npos);
}

TEST(IbPorts, NoDevices) {
  FakeTree t;
  IbScan scan = readIbDevices(t.root());
  EXPECT_FALSE(scan.directoryExists) << "no RDMA driver: no directory";
  EXPECT_TRUE(scan.devices.empty());
  t.mkdir("class/infiniband");
  scan = readIbDevices(t.root());
  EXPECT_TRUE(scan.directoryExists);
  EXPECT_TRUE(scan.devices.empty());
}

TEST(IbPorts, RoceMtuTable) {
  EXPECT_EQ(roceMtu(1500, 96), 1024);
  EXPECT_EQ(roceMtu(9000, 96), 4096);
  EXPECT_EQ(roceMtu(4200, 96), 4096);
  EXPECT_EQ(roceMtu(4180, 96), 2048);
  EXPECT_EQ(roceMtu(4180, 80), 4096);
  EXPECT_EQ(roceMtu(2100, 96), 1024);
  EXPECT_EQ(roceMtu(352, 96), 256);
  EXPECT_EQ(roceMtu(300, 96), std::nullopt);
}

}  // namespace
}  // namespace coil::topo
