// What libcoil decides from the topology (topo/process_topology.h,
// binding.h, placement.h), on the hand-made two-socket machine
// (two_sockets.xml: node 0 = CPUs 0-3, node 1 = CPUs 4-7) and on the
// one-node VM export: the rank's home node, the CPUs COIL_BIND=auto binds
// coil's threads to, the node a shm segment is placed on, the init line.
// Built only with hwloc (the XML reader).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "topo/binding.h"
#include "topo/placement.h"
#include "topo/process_topology.h"

namespace coil::topo {
namespace {

using Cpus = std::vector<unsigned>;
const std::string kDir = COIL_TOPO_TEST_DIR;

const Topology& twoSockets() {
  static const Topology t = fromXml(kDir + "/two_sockets.xml");
  return t;
}
const Topology& oneNode() {
  static const Topology t = fromXml(kDir + "/vm_one_node.xml");
  return t;
}

TEST(RankPlace, HomeNodeIsWhereMostOfTheRanksCpusAre) {
  EXPECT_EQ(homeNode(twoSockets(), {5}), 1u);
  EXPECT_EQ(homeNode(twoSockets(), {0, 1, 2, 3, 4, 5, 6, 7}), 0u);  // a tie: the lowest
  EXPECT_EQ(homeNode(twoSockets(), {3, 4, 5}), 1u);
  EXPECT_EQ(homeNode(twoSockets(), {}), std::nullopt);
  EXPECT_EQ(homeNode(twoSockets(), {64}), std::nullopt);  // not a CPU of the machine
  EXPECT_EQ(homeNode(Topology{}, {0}), std::nullopt);      // nothing learnt
  EXPECT_EQ(numaNodesOf(twoSockets(), {3, 4}), (Cpus{0, 1}));
}

TEST(Binding, NodeOfTheRankWithinItsMask) {
  std::string why;
  // A rank allowed everywhere: its threads stay on one node, all of it.
  EXPECT_EQ(bindingFor(twoSockets(), {0, 1, 2, 3, 4, 5, 6, 7}, &why), (Cpus{0, 1, 2, 3}));
  EXPECT_EQ(why, "NUMA node 0 of the rank's CPUs 0-7");
  // Never outside the rank's own CPUs.
  EXPECT_EQ(bindingFor(twoSockets(), {2, 5, 6}, &why), (Cpus{5, 6}));
  EXPECT_EQ(bindingFor(twoSockets(), {1}, &why), (Cpus{1}));
  EXPECT_EQ(bindingFor(oneNode(), {1}, &why), (Cpus{1}));
  EXPECT_EQ(bindingFor(oneNode(), {0, 1}, &why), (Cpus{0, 1}));
  EXPECT_TRUE(bindingFor(Topology{}, {0, 1}, &why).empty());
  EXPECT_EQ(why, "the topology knows no NUMA node of CPUs 0-1");
}

TEST(Binding, ModeFromTheEnvironment) {
  unsetenv("COIL_BIND");
  EXPECT_EQ(bindMode(), BindMode::kNone);
  setenv("COIL_BIND", "AUTO", 1);
  EXPECT_EQ(bindMode(), BindMode::kAuto);
  setenv("COIL_BIND", "none", 1);
  EXPECT_EQ(bindMode(), BindMode::kNone);
  setenv("COIL_BIND", "numa", 1);
  try {
    bindMode();
    ADD_FAILURE() << "COIL_BIND=numa accepted";
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "COIL_BIND=numa: expected none or auto");
  }
  unsetenv("COIL_BIND");
}

TEST(Placement, OnlyWithSeveralNodes) {
  EXPECT_EQ(placementNode(twoSockets(), {4, 5}), 1u);
  EXPECT_EQ(placementNode(twoSockets(), {0}), 0u);
  EXPECT_EQ(placementNode(oneNode(), {0, 1}), std::nullopt);  // no choice: no mbind
  EXPECT_EQ(placementNode(Topology{}, {0}), std::nullopt);
}

// A node with CPUs and no memory (some VMs, POWER, servers with a socket's
// DIMM slots empty): mbind(2) refuses it (EINVAL), and the kernel itself
// serves its CPUs from the nearest node with memory. So does placement.
TEST(Placement, AMemorylessNodesSegmentsGoToTheNearestNodeWithMemory) {
  Topology t = twoSockets();
  t.numaNodes[1].memoryBytes = 0;
  EXPECT_EQ(placementNode(t, {4, 5}), 0u);
  EXPECT_EQ(placementNode(t, {0}), 0u);
  // Three nodes: node 2's CPUs are nearer node 1 (distance 16) than node 0.
  t = twoSockets();
  t.numaNodes.push_back({2, {8, 9}, 0});
  t.numaDistances = NumaDistances{{0, 1, 2}, {10, 21, 31, 21, 10, 16, 31, 16, 10}};
  EXPECT_EQ(t.numaDistances->between(2, 1), 16u);
  EXPECT_EQ(t.numaDistances->between(2, 7), std::nullopt);  // not in the matrix
  EXPECT_EQ(placementNode(t, {8, 9}), 1u);
  EXPECT_EQ(placementNode(t, {4}), 1u);
  // Nothing known of any node's memory: the home node, as before.
  t = twoSockets();
  for (NumaNode& n : t.numaNodes) n.memoryBytes.reset();
  EXPECT_EQ(placementNode(t, {4, 5}), 1u);
}

TEST(Placement, PreferNodeSetsThePolicyOfTheRange) {
  // The real system call, on node 0 (every machine has it): the range's
  // policy reads back as MPOL_PREFERRED for node 0.
  const size_t bytes = 4 * size_t(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const int err = preferNode(p, bytes, 0);
  if (err == EPERM || err == ENOSYS) {
    munmap(p, bytes);
    GTEST_SKIP() << "mbind refused here: " << std::strerror(err);
  }
  ASSERT_EQ(err, 0) << std::strerror(err);
  int mode = -1;
  unsigned long mask = 0;
  constexpr unsigned long kMpolFAddr = 2;  // <numaif.h> MPOL_F_ADDR
  ASSERT_EQ(syscall(SYS_get_mempolicy, &mode, &mask, 8 * sizeof mask + 1, p, kMpolFAddr), 0)
      << std::strerror(errno);
  EXPECT_EQ(mode, 1);  // MPOL_PREFERRED
  EXPECT_EQ(mask, 1ul);
  EXPECT_NE(preferNode(nullptr, bytes, 0), 0);  // an unmapped range: the errno value
  munmap(p, bytes);
}

TEST(Placement, PreferNodeOnASharedMemorySegment) {
  // What shm_segment.cc does: the policy of a MAP_SHARED tmpfs mapping is
  // the segment's own (shared policy), set before its pages exist.
  const std::string name = "/coil_placement_test_" + std::to_string(getpid());
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  shm_unlink(name.c_str());
  const size_t bytes = 4 * size_t(sysconf(_SC_PAGESIZE));
  ASSERT_EQ(ftruncate(fd, off_t(bytes)), 0);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(p, MAP_FAILED);
  const int err = preferNode(p, bytes, 0);
  if (err == EPERM || err == ENOSYS) {
    munmap(p, bytes);
    GTEST_SKIP() << "mbind refused here: " << std::strerror(err);
  }
  EXPECT_EQ(err, 0) << std::strerror(err);
  static_cast<char*>(p)[0] = 1;  // a page, allocated under the policy
  int mode = -1;
  unsigned long mask = 0;
  ASSERT_EQ(syscall(SYS_get_mempolicy, &mode, &mask, 8 * sizeof mask + 1, p, 2ul), 0);
  EXPECT_EQ(mode, 1);  // MPOL_PREFERRED
  munmap(p, bytes);
}

TEST(RankPlace, InitLineSaysWhenTheNodeHasNoMemory) {
  Topology t = twoSockets();
  t.numaNodes[1].memoryBytes = 0;
  const std::string line = describeRankPlace(t, {4, 5});
  EXPECT_EQ(line.substr(0, line.find(';')),
            "cpus 4-5, NUMA node 1 (no local memory: its shm segments go to node 0)");
}

TEST(RankPlace, InitLineSaysCpusNodeAndWhatIsMissing) {
  EXPECT_EQ(describeRankPlace(oneNode(), {0, 1}),
            "cpus 0-1, NUMA node 0; not learnt: NUMA distances (hwloc has no matrix: usual with "
            "one NUMA node)");
  const std::string two = describeRankPlace(twoSockets(), {3, 4});
  EXPECT_EQ(two.substr(0, two.find(';')), "cpus 3-4, NUMA nodes 0-1");
  Topology nothing;
  nothing.missing.push_back("the whole topology (no hwloc)");
  EXPECT_EQ(describeRankPlace(nothing, {}),
            "cpus unknown (sched_getaffinity failed), NUMA node unknown; not learnt: the whole "
            "topology (no hwloc)");
}

TEST(RankPlace, ThisProcessIsLearntOnce) {
  const Topology& a = processTopology();
  const Topology& b = processTopology();
  EXPECT_EQ(&a, &b);
  EXPECT_GE(discoveryMilliseconds(), 0.0);
  const Cpus cpus = threadCpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_EQ(long(cpus.size()), [] {
    cpu_set_t s;
    return sched_getaffinity(0, sizeof s, &s) == 0 ? long(CPU_COUNT(&s)) : -1L;
  }());
  EXPECT_FALSE(a.numaNodes.empty()) << describeMissing(a);
  // Every init's part leaves the PCI devices out; the ib transport's part
  // has them (with hwloc), also learnt once, and is the same machine.
  EXPECT_FALSE(a.pciKnown);
  const Topology& withDevices = processTopologyWithDevices();
  EXPECT_EQ(&withDevices, &processTopologyWithDevices());
  EXPECT_EQ(withDevices.pus, a.pus);
  EXPECT_EQ(withDevices.numaNodes.size(), a.numaNodes.size());
}

}  // namespace
}  // namespace coil::topo
