// coil-topo's text and JSON reports from hand-built topologies: the
// machine this was written on (no GPU, no RDMA device), and a GPU beside a
// NIC behind one PCIe switch, with an RDMA port.
#include "topo/report.h"

#include <gtest/gtest.h>

namespace coil::topo {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The 2-vCPU virtual machine: one virtio NIC straight under the host bridge.
Report vm() {
  Report r;
  Topology& t = r.topology;
  t.source = "hwloc 2.9.0 on this machine";
  t.hostName = "vm";
  t.packages = 1;
  t.cores = 2;
  t.pus = 2;
  t.numaNodes = {{0, {0, 1}, 14455885824}};
  t.l3Caches = {{33554432, {0, 1}}};
  t.pciKnown = true;
  t.nics = {Nic{{0x1af4, 0x1041, 0x0200, "Virtio 1.0 network device"},
                {"0000:00:03.0", {"host 0000:[00-00]"}, 0, {0, 1}},
                {"eth0"},
                {}}};
  t.missing = {"NUMA distances (hwloc has no matrix: usual with one NUMA node)"};
  r.rdma = IbScan{"/sys/class/infiniband", false, {}};
  return r;
}

Report gpuBesideNic() {
  Report r = vm();
  Topology& t = r.topology;
  const std::vector<std::string> root = {"host 0000:[17-1b]", "bridge 0000:17:01.0",
                                         "bridge 0000:18:00.0"};
  auto slot = [&](const char* port) {
    auto b = root;
    b.push_back(port);
    return b;
  };
  t.gpus = {Gpu{{0x10de, 0x2330, 0x0302, "GH100"},
                {"0000:1a:00.0", slot("bridge 0000:19:00.0"), 0, {0, 1}}}};
  t.nics = {Nic{{0x15b3, 0x101d, 0x0200, ""},
                {"0000:1b:00.0", slot("bridge 0000:19:01.0"), 0, {0, 1}},
                {"ens1f0np0"},
                {"mlx5_0"}}};
  IbPort port{1,
              "ACTIVE",
              "LinkUp",
              "Ethernet",
              "100 Gb/sec (2X HDR)",
              4096,
              "from ens1f0np0's MTU 9000",
              {{3, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2", "ens1f0np0"}}};
  r.rdma = IbScan{"/sys/class/infiniband", true, {{"mlx5_0", "0000:1b:00.0", "", {port}}}};
  return r;
}

TEST(TextReport, SaysPlainlyWhatIsAbsent) {
  const std::string text = textReport(vm());
  EXPECT_TRUE(has(text, "coil-topo: hwloc 2.9.0 on this machine\n")) << text;
  EXPECT_TRUE(has(text, "Host: vm\n")) << text;
  EXPECT_TRUE(has(text, "Packages: 1   NUMA nodes: 1   Cores: 2   PUs: 2   L3: 1 x 32 MiB\n"))
      << text;
  EXPECT_TRUE(has(text, "  node 0: CPUs 0-1, 13.5 GiB\n")) << text;
  EXPECT_TRUE(has(text, "no GPU found (hwloc saw no NVIDIA PCI display device)")) << text;
  EXPECT_TRUE(has(text, "no RDMA device under /sys/class/infiniband")) << text;
  EXPECT_TRUE(has(text, "NIC0    X     0-1             0\n")) << text;
  EXPECT_TRUE(
      has(text, "  NIC0: eth0 (0000:00:03.0 [1af4:1041] class 0200 Virtio 1.0 network device)"))
      << text;
  EXPECT_TRUE(has(text, "Not learnt:\n  NUMA distances")) << text;
}

TEST(TextReport, MatrixLegendAndGids) {
  const std::string text = textReport(gpuBesideNic());
  EXPECT_FALSE(has(text, "no GPU found")) << text;
  EXPECT_TRUE(has(text, "       GPU0   NIC0   CPU Affinity    NUMA Affinity\n")) << text;
  EXPECT_TRUE(has(text, "GPU0    X      PIX   0-1             0\n")) << text;
  EXPECT_TRUE(has(text, "NIC0    PIX    X     0-1             0\n")) << text;
  EXPECT_TRUE(has(text, "  PIX  = through at most one PCIe switch (bridge)\n")) << text;
  EXPECT_TRUE(has(text, "  GPU0: 0000:1a:00.0 [10de:2330] class 0302 GH100\n")) << text;
  EXPECT_TRUE(has(text, "; RDMA mlx5_0)")) << text;
  EXPECT_TRUE(has(text, "  mlx5_0: PCI 0000:1b:00.0, NIC0 (named by hwloc)\n")) << text;
  EXPECT_TRUE(has(text,
                  "    port 1: ACTIVE (LinkUp), link layer Ethernet, active MTU 4096 "
                  "(from ens1f0np0's MTU 9000), rate 100 Gb/sec (2X HDR)\n"))
      << text;
  EXPECT_TRUE(
      has(text, "      3     RoCE v2     0000:0000:0000:0000:0000:ffff:0a00:0001  ens1f0np0\n"))
      << text;
}

// A node with memory and no CPUs: CXL memory, HBM in flat mode, a GPU's
// memory onlined as a node (Grace Hopper).
TEST(TextReport, AMemoryOnlyNodeSaysSo) {
  Report r = vm();
  r.topology.numaNodes.push_back({1, {}, 536870912});
  const std::string text = textReport(r);
  EXPECT_TRUE(has(text, "  node 0: CPUs 0-1, 13.5 GiB\n")) << text;
  EXPECT_TRUE(has(text, "  node 1: no CPUs (memory only), 512 MiB\n")) << text;
}

// In a container or a batch job's cgroup, hwloc leaves out the CPUs the
// cpuset does not allow: a node whose CPUs are all outside is not a node
// of memory only, and a node partly outside says which are.
TEST(TextReport, CpusOutsideTheCpusetAreNotMissingCpus) {
  Report r = vm();
  r.topology.numaNodes = {{0, {0, 1}, 1ull << 30, {2, 3}}, {1, {}, 1ull << 30, {4, 5, 6, 7}}};
  const std::string text = textReport(r);
  EXPECT_TRUE(has(text, "  node 0: CPUs 0-1 (2-3 outside this process's cpuset), 1 GiB\n"))
      << text;
  EXPECT_TRUE(has(text, "  node 1: no CPUs in this process's cpuset (4-7 outside it), 1 GiB\n"))
      << text;
  EXPECT_FALSE(has(text, "memory only")) << text;
  const std::string json = jsonReport(r);
  EXPECT_TRUE(has(json, "{\"os_index\": 1, \"cpus\": \"\", \"memory_bytes\": 1073741824, "
                        "\"cpus_outside_cpuset\": \"4-7\"}"))
      << json;
}

// A node with CPUs and no memory, and one whose memory was not learnt.
TEST(TextReport, NoMemoryIsNotUnknownMemory) {
  Report r = vm();
  r.topology.numaNodes.push_back({1, {2, 3}, 0});
  r.topology.numaNodes.push_back({2, {4, 5}, std::nullopt});
  const std::string text = textReport(r);
  EXPECT_TRUE(has(text, "  node 1: CPUs 2-3, no local memory\n")) << text;
  EXPECT_TRUE(has(text, "  node 2: CPUs 4-5, memory unknown\n")) << text;
  const std::string json = jsonReport(r);
  EXPECT_TRUE(has(json, "{\"os_index\": 1, \"cpus\": \"2-3\", \"memory_bytes\": 0, "
                        "\"cpus_outside_cpuset\": \"\"}")) << json;
  EXPECT_TRUE(has(json, "{\"os_index\": 2, \"cpus\": \"4-5\", \"memory_bytes\": null, "
                        "\"cpus_outside_cpuset\": \"\"}")) << json;
}

TEST(TextReport, WithoutPciOrRdma) {
  Report r = vm();
  r.topology.pciKnown = false;
  r.topology.nics.clear();
  r.topology.source = "Linux sysfs (hwloc not available at build time)";
  r.rdma.reset();
  r.rdmaNotReadWhy = "not asked";
  const std::string text = textReport(r);
  EXPECT_TRUE(has(text, "GPUs not looked for (no PCI information without hwloc)")) << text;
  EXPECT_TRUE(has(text, "RDMA ports not read (not asked)")) << text;
  EXPECT_FALSE(has(text, "Legend")) << "no devices, no matrix";
}

TEST(JsonReport, SameContent) {
  const std::string json = jsonReport(gpuBesideNic());
  EXPECT_TRUE(has(json, "\"host\": \"vm\"")) << json;
  EXPECT_TRUE(
      has(json,
          "\"numa_nodes\": [{\"os_index\": 0, \"cpus\": \"0-1\", \"memory_bytes\": 14455885824, "
          "\"cpus_outside_cpuset\": \"\"}]"))
      << json;
  EXPECT_TRUE(has(json,
                  "\"matrix\": {\"devices\": [\"GPU0\", \"NIC0\"], \"paths\": [[\"X\", \"PIX\"], "
                  "[\"PIX\", \"X\"]]}"))
      << json;
  EXPECT_TRUE(has(json, "\"vendor\": \"10de\", \"device\": \"2330\", \"class\": \"0302\"")) << json;
  EXPECT_TRUE(has(json, "\"model\": null")) << "empty model is null: " << json;
  EXPECT_TRUE(has(json, "\"active_mtu\": 4096")) << json;
  EXPECT_TRUE(has(json, "\"nic\": \"NIC0\", \"nic_match\": \"named by hwloc\"")) << json;
  EXPECT_TRUE(has(json, "\"absent\": []")) << json;
  EXPECT_TRUE(has(json, "\"numa_distances\": null")) << json;
}

TEST(JsonReport, AbsenceAndEscaping) {
  Report r = vm();
  r.topology.hostName = "a\"b\\c\nd";
  r.topology.numaDistances = NumaDistances{{0, 1}, {10, 21, 21, 10}};
  const std::string json = jsonReport(r);
  EXPECT_TRUE(has(json, "\"host\": \"a\\\"b\\\\c\\u000ad\"")) << json;
  EXPECT_TRUE(
      has(json, "\"numa_distances\": {\"nodes\": [0, 1], \"values\": [[10, 21], [21, 10]]}"))
      << json;
  EXPECT_TRUE(has(json,
                  "\"absent\": [\"no GPU found (hwloc saw no NVIDIA PCI display device)\", "
                  "\"no RDMA device under /sys/class/infiniband (no such directory: no RDMA "
                  "driver loaded)\"]"))
      << json;
}

}  // namespace
}  // namespace coil::topo
