// What discover() falls back to without hwloc: /sys's CPUs and NUMA nodes,
// on fake trees.
#include "topo/topology_sysfs.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "fake_tree.h"

namespace coil::topo {
namespace {

using test::FakeTree;
using Cpus = std::vector<unsigned>;

// Two packages of one core with two hardware threads each, one NUMA node per
// package: CPUs 0 and 2 on package 0, 1 and 3 on package 1 (as Linux numbers
// them on many two-socket machines).
void writeTwoSockets(const FakeTree& t) {
  t.write("devices/system/cpu/online", "0-3");
  for (int cpu = 0; cpu < 4; ++cpu) {
    const std::string dir = "devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    t.write(dir + "physical_package_id", std::to_string(cpu % 2));
    t.write(dir + "core_id", "0");
  }
  t.write("devices/system/node/node0/cpulist", "0,2");
  t.write("devices/system/node/node0/meminfo",
          "Node 0 MemTotal:        1024 kB\nNode 0 MemFree:          512 kB");
  t.write("devices/system/node/node1/cpulist", "1,3");
  t.write("devices/system/node/node1/meminfo", "Node 1 MemTotal:        2048 kB");
  t.write("devices/system/node/online", "0-1");  // not a nodeN directory: ignored
}

TEST(TopologySysfs, TwoSockets) {
  FakeTree t;
  writeTwoSockets(t);
  const Topology topo = minimalFromSysfs(t.root());
  EXPECT_EQ(topo.source, "Linux sysfs under " + t.root());
  EXPECT_EQ(topo.pus, 4);
  EXPECT_EQ(topo.packages, 2);
  EXPECT_EQ(topo.cores, 2);
  ASSERT_EQ(topo.numaNodes.size(), 2u);
  EXPECT_EQ(topo.numaNodes[0].osIndex, 0u);
  EXPECT_EQ(topo.numaNodes[0].cpus, (Cpus{0, 2}));
  EXPECT_EQ(topo.numaNodes[0].memoryBytes, 1024u * 1024);
  EXPECT_EQ(topo.numaNodes[1].osIndex, 1u);
  EXPECT_EQ(topo.numaNodes[1].cpus, (Cpus{1, 3}));
  EXPECT_EQ(topo.numaNodes[1].memoryBytes, 2048u * 1024);
  EXPECT_TRUE(topo.hostName.empty());
  EXPECT_TRUE(topo.l3Caches.empty());
  EXPECT_FALSE(topo.pciKnown) << "PCI devices were not looked for";
  EXPECT_FALSE(topo.numaDistances);
  ASSERT_EQ(topo.missing.size(), 1u) << describeMissing(topo);
  EXPECT_NE(topo.missing[0].find("need hwloc"), std::string::npos);
}

// A node whose MemTotal is 0 has no memory (a known fact, not a missing
// one); a node without a meminfo file has memory not learnt.
TEST(TopologySysfs, NoMemoryIsKnownUnreadableMemoryIsMissing) {
  FakeTree t;
  writeTwoSockets(t);
  t.write("devices/system/node/node1/meminfo", "Node 1 MemTotal:           0 kB");
  t.write("devices/system/node/node2/cpulist", "");
  Topology topo = minimalFromSysfs(t.root());
  ASSERT_EQ(topo.numaNodes.size(), 3u);
  EXPECT_EQ(topo.numaNodes[1].memoryBytes, std::optional<uint64_t>(0));
  EXPECT_EQ(topo.numaNodes[2].memoryBytes, std::nullopt);
  const std::string missing = describeMissing(topo);
  EXPECT_EQ(missing.find("memory of NUMA node 1"), std::string::npos) << missing;
  EXPECT_NE(missing.find("memory of NUMA node 2"), std::string::npos) << missing;
}

TEST(TopologySysfs, PartsMissingAreNamed) {
  FakeTree t;
  t.write("devices/system/cpu/online", "0");
  const Topology topo = minimalFromSysfs(t.root());
  EXPECT_EQ(topo.pus, 1);
  EXPECT_EQ(topo.packages, 0);
  EXPECT_EQ(topo.cores, 0);
  EXPECT_TRUE(topo.numaNodes.empty());
  const std::string missing = describeMissing(topo);
  EXPECT_NE(missing.find("packages and cores"), std::string::npos) << missing;
  EXPECT_NE(missing.find("NUMA nodes"), std::string::npos) << missing;
  EXPECT_NE(missing.find("; "), std::string::npos) << "sentences joined by '; '";
}

TEST(TopologySysfs, NoCpusIsAnError) {
  FakeTree t;
  try {
    minimalFromSysfs(t.root());
    FAIL() << "expected coil::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(t.root() + "/devices/system/cpu/online"),
              std::string::npos)
        << e.what();
  }
  t.write("devices/system/cpu/online", "garbage");
  EXPECT_THROW(minimalFromSysfs(t.root()), Error);
}

}  // namespace
}  // namespace coil::topo
