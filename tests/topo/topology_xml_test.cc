// The hwloc reader (topology_hwloc.cc) on hwloc XML files, every field:
//   two_sockets.xml  hand-made from an export of hwloc's synthetic
//                    "pack:2 [numa] l3:1 core:2 pu:2" with a NUMALatency
//                    matrix, PCI tree added by hand: on package 0 a PCIe
//                    switch with an H100 (and its audio function) and a
//                    ConnectX-6 Dx (ens1f0np0, mlx5_0), and an NVMe drive
//                    under the host bridge; on package 1 an E810 (ens2).
//   vm_one_node.xml  `lstopo-no-graphics --of xml` on the 2-vCPU VM this
//                    was written on (hwloc 2.9.0), unedited.
// Built only with hwloc (topology_absent_test.cc otherwise).
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "fake_tree.h"
#include "topo/topology.h"

namespace coil::topo {
namespace {

using Cpus = std::vector<unsigned>;
using Names = std::vector<std::string>;
const std::string kDir = COIL_TOPO_TEST_DIR;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TopologyXml, TwoSocketsCpusAndMemory) {
  const Topology t = fromXml(kDir + "/two_sockets.xml");
  EXPECT_EQ(t.source, "hwloc XML file " + kDir + "/two_sockets.xml");
  EXPECT_EQ(t.hostName, "testbox");
  EXPECT_EQ(t.packages, 2);
  EXPECT_EQ(t.cores, 4);
  EXPECT_EQ(t.pus, 8);
  ASSERT_EQ(t.numaNodes.size(), 2u);
  EXPECT_EQ(t.numaNodes[0].osIndex, 0u);
  EXPECT_EQ(t.numaNodes[0].cpus, (Cpus{0, 1, 2, 3}));
  EXPECT_EQ(t.numaNodes[0].memoryBytes, 64ull << 30);
  EXPECT_EQ(t.numaNodes[1].osIndex, 1u);
  EXPECT_EQ(t.numaNodes[1].cpus, (Cpus{4, 5, 6, 7}));
  EXPECT_EQ(t.numaNodes[1].memoryBytes, 64ull << 30);
  ASSERT_EQ(t.l3Caches.size(), 2u);
  EXPECT_EQ(t.l3Caches[0].sizeBytes, 32ull << 20);
  EXPECT_EQ(t.l3Caches[0].cpus, (Cpus{0, 1, 2, 3}));
  EXPECT_EQ(t.l3Caches[1].cpus, (Cpus{4, 5, 6, 7}));
}

TEST(TopologyXml, TwoSocketsDistances) {
  const Topology t = fromXml(kDir + "/two_sockets.xml");
  ASSERT_TRUE(t.numaDistances);
  EXPECT_EQ(t.numaDistances->nodes, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(t.numaDistances->values, (std::vector<uint64_t>{10, 21, 21, 10}));
  EXPECT_EQ(t.numaDistances->at(0, 1), 21u);
  EXPECT_EQ(t.numaDistances->at(1, 1), 10u);
}

TEST(TopologyXml, TwoSocketsGpu) {
  const Topology t = fromXml(kDir + "/two_sockets.xml");
  EXPECT_TRUE(t.pciKnown);
  ASSERT_EQ(t.gpus.size(), 1u) << "the GPU's audio function (class 0403) is no GPU";
  const Gpu& g = t.gpus[0];
  EXPECT_EQ(g.ids.vendor, 0x10de);
  EXPECT_EQ(g.ids.device, 0x2330);
  EXPECT_EQ(g.ids.classId, 0x0302);
  EXPECT_EQ(g.ids.model, "GH100 [H100 SXM5 80GB]");
  EXPECT_EQ(g.where.busId, "0000:1a:00.0");
  EXPECT_EQ(g.where.bridges, (Names{"host 0000:[17-1b]", "bridge 0000:17:01.0",
                                    "bridge 0000:18:00.0", "bridge 0000:19:00.0"}));
  EXPECT_EQ(g.where.numaNode, 0);
  EXPECT_EQ(g.where.cpus, (Cpus{0, 1, 2, 3}));
}

TEST(TopologyXml, TwoSocketsNics) {
  const Topology t = fromXml(kDir + "/two_sockets.xml");
  ASSERT_EQ(t.nics.size(), 2u) << "the NVMe drive is no NIC";
  const Nic& cx6 = t.nics[0];
  EXPECT_EQ(cx6.ids.vendor, 0x15b3);
  EXPECT_EQ(cx6.ids.device, 0x101d);
  EXPECT_EQ(cx6.ids.classId, 0x0200);
  EXPECT_EQ(cx6.ids.model, "MT2892 Family [ConnectX-6 Dx]");
  EXPECT_EQ(cx6.where.busId, "0000:1b:00.0");
  EXPECT_EQ(cx6.where.bridges, (Names{"host 0000:[17-1b]", "bridge 0000:17:01.0",
                                      "bridge 0000:18:00.0", "bridge 0000:19:01.0"}));
  EXPECT_EQ(cx6.where.numaNode, 0);
  EXPECT_EQ(cx6.where.cpus, (Cpus{0, 1, 2, 3}));
  EXPECT_EQ(cx6.interfaces, (Names{"ens1f0np0"}));
  EXPECT_EQ(cx6.ibDevices, (Names{"mlx5_0"}));

  const Nic& e810 = t.nics[1];
  EXPECT_EQ(e810.ids.vendor, 0x8086);
  EXPECT_EQ(e810.ids.device, 0x1592);
  EXPECT_EQ(e810.where.busId, "0000:ca:00.0");
  EXPECT_EQ(e810.where.bridges, (Names{"host 0000:[ca-ca]"}));
  EXPECT_EQ(e810.where.numaNode, 1);
  EXPECT_EQ(e810.where.cpus, (Cpus{4, 5, 6, 7}));
  EXPECT_EQ(e810.interfaces, (Names{"ens2"}));
  EXPECT_TRUE(e810.ibDevices.empty());
}

TEST(TopologyXml, TwoSocketsMissing) {
  const Topology t = fromXml(kDir + "/two_sockets.xml");
  ASSERT_EQ(t.missing.size(), 2u) << describeMissing(t);
  EXPECT_TRUE(has(t.missing[0], "CUDA device numbers")) << t.missing[0];
  EXPECT_TRUE(has(t.missing[1], "NVLink")) << t.missing[1];
  EXPECT_EQ(describeMissing(t), t.missing[0] + "; " + t.missing[1]);
}

TEST(TopologyXml, VirtualMachineExport) {
  const Topology t = fromXml(kDir + "/vm_one_node.xml");
  EXPECT_EQ(t.hostName, "vm");
  EXPECT_EQ(t.packages, 1);
  EXPECT_EQ(t.cores, 2);
  EXPECT_EQ(t.pus, 2);
  ASSERT_EQ(t.numaNodes.size(), 1u);
  EXPECT_EQ(t.numaNodes[0].cpus, (Cpus{0, 1}));
  EXPECT_EQ(t.numaNodes[0].memoryBytes, 14455885824u);
  ASSERT_EQ(t.l3Caches.size(), 1u);
  EXPECT_EQ(t.l3Caches[0].sizeBytes, 32ull << 20);
  EXPECT_TRUE(t.gpus.empty());
  ASSERT_EQ(t.nics.size(), 1u) << "the virtio block device is no NIC";
  EXPECT_EQ(t.nics[0].interfaces, (Names{"eth0"}));
  EXPECT_EQ(t.nics[0].where.busId, "0000:00:03.0");
  EXPECT_EQ(t.nics[0].where.bridges, (Names{"host 0000:[00-00]"}));
  EXPECT_EQ(t.nics[0].where.numaNode, 0) << "the machine's one node";
  EXPECT_FALSE(t.numaDistances);
  EXPECT_EQ(describeMissing(t), "NUMA distances (hwloc has no matrix: usual with one NUMA node)");
}

TEST(TopologyXml, UnreadableFilesAreErrorsNamingThem) {
  try {
    fromXml(kDir + "/no-such-file.xml");
    FAIL() << "expected coil::Error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "no-such-file.xml")) << e.what();
    EXPECT_TRUE(has(e.what(), "No such file")) << e.what();
  }
  test::FakeTree tree;
  tree.write("junk.xml", "this is not XML");
  try {
    fromXml(tree.root() + "/junk.xml");
    FAIL() << "expected coil::Error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "junk.xml")) << e.what();
  }
}

TEST(TopologyDiscover, ThisMachine) {
  const Topology t = discover();
  EXPECT_TRUE(has(t.source, "hwloc")) << t.source;
  EXPECT_GE(t.pus, 1);
  EXPECT_GE(t.cores, 1);
  EXPECT_FALSE(t.numaNodes.empty());
  EXPECT_TRUE(t.pciKnown);
  size_t numaCpus = 0;
  for (const NumaNode& n : t.numaNodes) numaCpus += n.cpus.size();
  EXPECT_EQ(numaCpus, static_cast<size_t>(t.pus)) << "every PU in exactly one NUMA node";
}

// What every communicator init learns: the same machine without its PCI
// devices, which are not looked for (pciKnown false, not "there are none").
TEST(TopologyDiscover, CpusAndMemoryIsTheSameMachineWithoutThePciDevices) {
  const Topology all = discover(Scope::WithDevices);
  const Topology part = discover(Scope::CpusAndMemory);
  EXPECT_FALSE(part.pciKnown);
  EXPECT_TRUE(part.nics.empty());
  EXPECT_TRUE(part.gpus.empty());
  EXPECT_EQ(part.source, all.source);
  EXPECT_EQ(part.hostName, all.hostName);
  EXPECT_EQ(part.packages, all.packages);
  EXPECT_EQ(part.cores, all.cores);
  EXPECT_EQ(part.pus, all.pus);
  ASSERT_EQ(part.numaNodes.size(), all.numaNodes.size());
  for (size_t i = 0; i < all.numaNodes.size(); ++i) {
    EXPECT_EQ(part.numaNodes[i].osIndex, all.numaNodes[i].osIndex);
    EXPECT_EQ(part.numaNodes[i].cpus, all.numaNodes[i].cpus);
    EXPECT_EQ(part.numaNodes[i].memoryBytes, all.numaNodes[i].memoryBytes);
  }
  EXPECT_EQ(part.l3Caches.size(), all.l3Caches.size());
  EXPECT_EQ(part.numaDistances.has_value(), all.numaDistances.has_value());
}

}  // namespace
}  // namespace coil::topo
