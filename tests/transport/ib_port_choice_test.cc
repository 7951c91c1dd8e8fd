// The ib transport's choice of device, port and GID (transports/ib/
// port_choice.h): COIL_IB_HCA in NCCL's syntax and the RoCE GID ranking.
// Pure rules: they run where no RDMA device exists; the rxe suite runs the
// transport itself.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "transports/ib/port_choice.h"

namespace coil::transport::ib {
namespace {

TEST(HcaFilter, EmptyAdmitsEverything) {
  const HcaFilter f = HcaFilter::parse("");
  EXPECT_TRUE(f.admits("mlx5_0", 1));
  EXPECT_TRUE(f.admits("rxe2", 3));
}

TEST(HcaFilter, NamesArePrefixesUnlessExact) {
  const HcaFilter prefix = HcaFilter::parse("mlx5");
  EXPECT_TRUE(prefix.admits("mlx5_0", 1));
  EXPECT_TRUE(prefix.admits("mlx5_11", 2));
  EXPECT_FALSE(prefix.admits("rxe0", 1));
  const HcaFilter exact = HcaFilter::parse("=mlx5_1");
  EXPECT_TRUE(exact.admits("mlx5_1", 1));
  EXPECT_FALSE(exact.admits("mlx5_10", 1));  // a prefix match would take it
}

TEST(HcaFilter, PortsNarrowAnEntry) {
  const HcaFilter f = HcaFilter::parse("mlx5_0:1,mlx5_1");
  EXPECT_TRUE(f.admits("mlx5_0", 1));
  EXPECT_FALSE(f.admits("mlx5_0", 2));
  EXPECT_TRUE(f.admits("mlx5_1", 2));
  EXPECT_FALSE(f.admits("mlx5_2", 1));
}

TEST(HcaFilter, CaretExcludes) {
  const HcaFilter f = HcaFilter::parse("^mlx5_2,rxe0:1");
  EXPECT_FALSE(f.admits("mlx5_2", 1));
  EXPECT_TRUE(f.admits("mlx5_0", 1));
  EXPECT_FALSE(f.admits("rxe0", 1));
  EXPECT_TRUE(f.admits("rxe0", 2));
  const HcaFilter exact = HcaFilter::parse("^=rxe1");
  EXPECT_FALSE(exact.admits("rxe1", 1));
  EXPECT_TRUE(exact.admits("rxe10", 1));
}

TEST(HcaFilter, BadPortsAreNamed) {
  for (const char* bad : {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256", "a,b:1x"}) {
    try {
      HcaFilter::parse(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), coilInvalidUsage) << bad;
      EXPECT_NE(std::string(e.what()).find("COIL_IB_HCA"), std::string::npos) << e.what();
    }
  }
}

struct Gid {
  uint8_t raw[16] = {};
};

Gid ipv4Mapped(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  Gid g;
  g.raw[10] = g.raw[11] = 0xff;
  g.raw[12] = a, g.raw[13] = b, g.raw[14] = c, g.raw[15] = d;
  return g;
}

Gid linkLocal() {
  Gid g;
  g.raw[0] = 0xfe, g.raw[1] = 0x80, g.raw[15] = 7;
  return g;
}

Gid globalV6() {
  Gid g;
  g.raw[0] = 0x20, g.raw[1] = 0x01, g.raw[2] = 0x0d, g.raw[3] = 0xb8, g.raw[15] = 1;
  return g;
}

TEST(GidScore, PrefersRoceV2WithAnIpv4AddressAndNeverLinkLocal) {
  const Gid v4 = ipv4Mapped(10, 77, 1, 1), v6 = globalV6(), ll = linkLocal(), zero;
  EXPECT_EQ(gidScore(v4.raw, "RoCE v2"), 3);
  EXPECT_EQ(gidScore(v6.raw, "RoCE v2"), 2);
  EXPECT_EQ(gidScore(v4.raw, "IB/RoCE v1"), 1);
  EXPECT_EQ(gidScore(ll.raw, "RoCE v2"), -1);
  EXPECT_EQ(gidScore(zero.raw, "RoCE v2"), -1);
  EXPECT_EQ(gidScore(v4.raw, ""), 1);  // no sysfs type: treated as v1
  EXPECT_TRUE(isIpv4MappedGid(v4.raw));
  EXPECT_FALSE(isIpv4MappedGid(v6.raw));
  EXPECT_TRUE(isLinkLocalGid(ll.raw));
  EXPECT_TRUE(isZeroGid(zero.raw));
}

// The NIC nearest the rank (issue #15): devices on the rank's NUMA node are
// tried first, unless COIL_IB_HCA chose.
using Order = std::vector<size_t>;

TEST(DeviceOrder, NearestNodeFirstInListOrder) {
  // mlx5_0 and mlx5_2 on node 0, mlx5_1 and mlx5_3 on node 1.
  const std::vector<int> nodes{0, 1, 0, 1};
  EXPECT_EQ(deviceOrder(nodes, 1, false), (Order{1, 3, 0, 2}));
  EXPECT_EQ(deviceOrder(nodes, 0, false), (Order{0, 2, 1, 3}));
}

TEST(DeviceOrder, UnknownNodesKeepTheListOrder) {
  EXPECT_EQ(deviceOrder({0, 1}, -1, false), (Order{0, 1}));        // the rank's node unknown
  EXPECT_EQ(deviceOrder({-1, -1, 1}, 1, false), (Order{2, 0, 1}));  // rxe: node -1, after
  EXPECT_EQ(deviceOrder({-1, -1}, 0, false), (Order{0, 1}));
  EXPECT_TRUE(deviceOrder({}, 0, false).empty());
}

TEST(DeviceOrder, CoilIbHcaKeepsItsPrecedence) {
  EXPECT_EQ(deviceOrder({0, 1, 0, 1}, 1, true), (Order{0, 1, 2, 3}));
}

}  // namespace
}  // namespace coil::transport::ib
