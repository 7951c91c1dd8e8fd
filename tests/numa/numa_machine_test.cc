// Issue #15's NUMA work on a kernel that really has several NUMA nodes: the
// qemu guest of tests/numa/meson.build (tools/rxe/guest-run --smp 6
// --numa-nodes 2 --memoryless-nodes 1 --memory-only-nodes 1): three
// sockets, node 0 = CPUs 0-1, node 1 = CPUs 2-3, node 2 = CPUs 4-5 and no
// memory; node 3 = memory and no CPUs; distances 10, 21 and 31.
// The unit tests (tests/topo/placement_test.cc) check the same decisions
// on an hwloc XML file; here the machine itself is read, the threads are
// really moved and the pages really placed, and the kernel says where:
//   - discovery: the nodes, their CPUs and the distance matrix, against
//     /sys/devices/system/node;
//   - COIL_BIND=auto: coil's own threads (named coil-tcp-rK, coil-ib-rK)
//     run on the CPUs of their rank's home node within the rank's mask, and
//     the application's threads are not moved; without it nothing moves;
//   - shm placement: every segment a rank creates has the policy
//     "prefer:<its home node>" and its pages on that node, as
//     /proc/self/numa_maps reports them, whichever rank touched them first;
//     a rank on the memoryless node 2 gets the nearest node with memory
//     (node 0: both are 21 away, and the lowest wins), not mbind's EINVAL
//     and pages wherever they were first touched.
// Ranks run as threads (each sets its own mask before init) and as
// processes. On a machine with one NUMA node the binary exits 77.
#include <gtest/gtest.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "harness/run_ranks.h"
#include "topo/cpu_list.h"
#include "topo/process_topology.h"

namespace {

using coil::test::Launch;
using coil::test::ScopedEnv;
using Cpus = std::vector<unsigned>;

// The guest's layout, which the first test checks against the kernel:
// three sockets, the third without memory, and a node of memory only.
const std::vector<Cpus> kNodeCpus = {{0, 1}, {2, 3}, {4, 5}, {}};
const std::vector<bool> kNodeHasMemory = {true, true, false, true};

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

Cpus cpusOf(const std::string& list) {
  return coil::topo::parseCpuList(list).value_or(Cpus{});
}

std::string onlineNodes() { return readLine("/sys/devices/system/node/online"); }

void setOwnMask(const Cpus& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c : cpus) CPU_SET(c, &set);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0);
}

// The Cpus_allowed_list of a /proc/.../status file ("0-1").
std::string allowedCpus(const std::string& statusPath) {
  std::ifstream status(statusPath);
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Cpus_allowed_list:", 0) == 0)
      return line.substr(line.find_first_not_of(" \t", 18));
  return "?";
}

std::string ownMask() { return allowedCpus("/proc/thread-self/status"); }

// name -> Cpus_allowed_list of every thread of this process.
std::multimap<std::string, std::string> threadsAndMasks() {
  std::multimap<std::string, std::string> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string task = std::string("/proc/self/task/") + e->d_name;
    out.emplace(readLine(task + "/comm"), allowedCpus(task + "/status"));
  }
  closedir(dir);
  return out;
}

TEST(NumaMachine, TopologyIsTheKernels) {
  // The guest is what the other tests assume.
  ASSERT_EQ(onlineNodes(), "0-3");
  ASSERT_EQ(readLine("/sys/devices/system/node/has_memory"), "0-1,3");
  for (unsigned n = 0; n < kNodeCpus.size(); ++n)
    ASSERT_EQ(cpusOf(readLine("/sys/devices/system/node/node" + std::to_string(n) + "/cpulist")),
              kNodeCpus[n])
        << "node " << n;
  // What libcoil learnt (hwloc, or /sys without it), against the kernel.
  const coil::topo::Topology& topology = coil::topo::processTopology();
  ASSERT_EQ(topology.numaNodes.size(), 4u) << topology.source;
  for (unsigned n = 0; n < 4; ++n) {
    EXPECT_EQ(topology.numaNodes[n].osIndex, n);
    EXPECT_EQ(topology.numaNodes[n].cpus, kNodeCpus[n]) << "node " << n;
    ASSERT_TRUE(topology.numaNodes[n].memoryBytes.has_value()) << "node " << n;
    if (kNodeHasMemory[n])
      EXPECT_GT(*topology.numaNodes[n].memoryBytes, 256u << 20) << "node " << n;
    else
      EXPECT_EQ(*topology.numaNodes[n].memoryBytes, 0u) << "node " << n;
  }
  EXPECT_EQ(coil::topo::describeMissing(topology).find("memory"), std::string::npos)
      << "a node without memory is known, not missing";
  ASSERT_TRUE(topology.numaDistances.has_value()) << "no distance matrix learnt";
  const coil::topo::NumaDistances& d = *topology.numaDistances;
  ASSERT_EQ(d.nodes, (Cpus{0, 1, 2, 3}));
  for (unsigned row = 0; row < 4; ++row) {
    std::istringstream kernel(readLine("/sys/devices/system/node/node" + std::to_string(row) +
                                       "/distance"));
    for (unsigned column = 0; column < 4; ++column) {
      uint64_t want = 0;
      kernel >> want;
      EXPECT_EQ(d.at(row, column), want) << "distance " << row << " -> " << column;
    }
  }
  EXPECT_EQ(d.at(0, 1), 21u);
  EXPECT_EQ(d.at(1, 3), 31u);
}

// --- COIL_BIND=auto ------------------------------------------------------

struct BindCase {
  Cpus rankMask;       // the rank's thread's mask before init
  std::string proxy;   // where its coil thread must run
};
// Rank 0 may run anywhere: its node is 0 (a tie goes to the lowest), so
// its proxy gets node 0's CPUs. Rank 1 spans nodes 0 and 1, most of it on
// node 1. Rank 2 is mostly on the memoryless node 2, which is still where
// its CPUs are.
const std::vector<BindCase> kBindCases = {
    {{0, 1, 2, 3, 4, 5}, "0-1"}, {{1, 2, 3}, "2-3"}, {{3, 4, 5}, "4-5"}};

// The transports with threads of coil's own (shm has none).
std::vector<std::string> transportsWithThreads() {
  std::vector<std::string> out;
  for (const std::string& t : coil::test::testedTransports())
    if (t != "shm") out.push_back(t);
  return out;
}

class NumaBind : public ::testing::TestWithParam<std::tuple<std::string, Launch>> {};

void runBound(const std::string& transport, Launch launch, const std::string& bind) {
  ScopedEnv bindEnv("COIL_BIND", bind);
  const int n = int(kBindCases.size());
  coil::test::runRanksRaw({n, launch, transport}, [&](const coilUniqueId& id, int rank) {
    const BindCase& c = kBindCases[size_t(rank)];
    setOwnMask(c.rankMask);
    const std::string rankMask = coil::topo::formatCpuList(c.rankMask);
    coilComm_t comm = coil::test::initWithTimeout(id, n, rank, 60000);
    ASSERT_NE(comm, nullptr);
    float x = 1.0f;
    ASSERT_EQ(coilAllReduce(&x, &x, 1, coilFloat32, coilSum, comm, nullptr), coilSuccess);
    EXPECT_EQ(x, float(n));
    // This rank's coil threads, by name (coil-tcp-r1), and its own thread.
    const std::string mine = "coil-" + transport + "-r" + std::to_string(rank);
    const auto threads = threadsAndMasks();
    EXPECT_GE(threads.count(mine), 1u) << "no thread named " << mine;
    for (auto [it, end] = threads.equal_range(mine); it != end; ++it)
      EXPECT_EQ(it->second, bind == "auto" ? c.proxy : rankMask)
          << mine << " (rank mask " << rankMask << ", COIL_BIND=" << bind << ")";
    EXPECT_EQ(ownMask(), rankMask) << "rank " << rank << "'s own thread was moved";
    // Every rank looks before any proxy stops.
    ASSERT_EQ(coilAllReduce(&x, &x, 1, coilFloat32, coilSum, comm, nullptr), coilSuccess);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

TEST_P(NumaBind, CoilThreadsRunOnTheRanksHomeNode) {
  runBound(std::get<0>(GetParam()), std::get<1>(GetParam()), "auto");
}

TEST_P(NumaBind, WithoutCoilBindNothingMoves) {
  runBound(std::get<0>(GetParam()), std::get<1>(GetParam()), "");
}

std::string launchName(Launch l) { return l == Launch::Threads ? "threads" : "procs"; }

INSTANTIATE_TEST_SUITE_P(
    Transports, NumaBind,
    ::testing::Combine(::testing::ValuesIn(transportsWithThreads()),
                       ::testing::Values(Launch::Threads, Launch::Processes)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + launchName(std::get<1>(info.param));
    });

// --- shm placement -------------------------------------------------------

// One mapping of a coil segment in /proc/self/numa_maps.
struct SegmentMapping {
  std::string file;    // /dev/shm/coil-<comm>-r2 (a rank's FIFOs) or -w2 (its window)
  int creator = -1;    // the rank in the name
  std::string policy;  // "prefer:1"
  std::map<unsigned, long> pagesOnNode;  // N1=40 -> {1: 40}
};

std::vector<SegmentMapping> coilSegmentMappings() {
  std::vector<SegmentMapping> out;
  std::ifstream maps("/proc/self/numa_maps");
  // "file=/dev/shm/coil-1ee5f4ac5df7-28122-w0\040(deleted)": coil unlinks
  // a segment once every rank has it mapped.
  static const std::regex segment(R"(^file=(/dev/shm/coil-\S+-[rw](\d+))(\\040\(deleted\))?$)");
  static const std::regex node(R"(^N(\d+)=(\d+)$)");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields(line);
    std::string address, policy, field;
    fields >> address >> policy;
    SegmentMapping m;
    m.policy = policy;
    while (fields >> field) {
      std::smatch match;
      if (std::regex_search(field, match, segment)) {
        m.file = match[1];
        m.creator = std::stoi(match[2]);
      } else if (std::regex_match(field, match, node)) {
        m.pagesOnNode[unsigned(std::stoul(match[1]))] = std::stol(match[2]);
      }
    }
    if (m.creator >= 0) out.push_back(m);
  }
  return out;
}

// Rank r's mask and the node of its segments. Rank 2 is on the memoryless
// node 2: its segments go to the nearest node with memory, node 0 (nodes
// 0 and 1 are both 21 away; the lowest wins).
const std::vector<std::pair<Cpus, unsigned>> kPlacementCases = {
    {{0, 1}, 0}, {{2, 3}, 1}, {{4, 5}, 0}};

class NumaPlacement : public ::testing::TestWithParam<std::tuple<Launch, int>> {};

TEST_P(NumaPlacement, EverySegmentLivesOnItsCreatorsNode) {
  const auto [launch, n] = GetParam();
  coil::test::runRanksRaw({n, launch, "shm"}, [&, n = n](const coilUniqueId& id, int rank) {
    setOwnMask(kPlacementCases[size_t(rank)].first);
    coilComm_t comm = coil::test::initWithTimeout(id, n, rank, 60000);
    ASSERT_NE(comm, nullptr);
    // Small, medium and large all-reduces, and an all-gather: the FIFOs'
    // slots and the window's are all written and read.
    for (size_t count : {size_t{1}, size_t{4099}, size_t{1} << 20}) {
      std::vector<float> data(count, float(rank + 1)), gathered(count * size_t(n));
      ASSERT_EQ(coilAllReduce(data.data(), data.data(), count, coilFloat32, coilSum, comm, nullptr),
                coilSuccess);
      EXPECT_EQ(data[count - 1], float(n * (n + 1) / 2)) << count;
      ASSERT_EQ(coilAllGather(data.data(), gathered.data(), count, coilFloat32, comm, nullptr),
                coilSuccess);
    }
    const std::vector<SegmentMapping> mappings = coilSegmentMappings();
    EXPECT_GE(mappings.size(), size_t(n)) << "rank " << rank << " maps too few coil segments";
    std::map<unsigned, long> pagesSeen;
    for (const SegmentMapping& m : mappings) {
      ASSERT_LT(m.creator, n) << m.file;
      const unsigned home = kPlacementCases[size_t(m.creator)].second;
      EXPECT_EQ(m.policy, "prefer:" + std::to_string(home))
          << m.file << " (created by rank " << m.creator << "), seen from rank " << rank;
      for (const auto& [node, pages] : m.pagesOnNode) {
        EXPECT_EQ(node, home) << m.file << ": " << pages << " pages on node " << node
                              << ", seen from rank " << rank;
        pagesSeen[node] += pages;
      }
    }
    // Both nodes with memory hold pages this rank touched: its own
    // segment's and a peer's on the other node.
    EXPECT_GT(pagesSeen[0], 0) << "rank " << rank;
    EXPECT_GT(pagesSeen[1], 0) << "rank " << rank;
    ASSERT_EQ(coilBarrier(comm, nullptr), coilSuccess);  // every rank has looked
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shm, NumaPlacement,
    ::testing::Combine(::testing::Values(Launch::Threads, Launch::Processes),
                       ::testing::Values(2, 3)),
    [](const auto& info) {
      return launchName(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param));
    });

}  // namespace

int main(int argc, char** argv) {
  const std::string nodes = onlineNodes();
  if (nodes.find_first_of(",-") == std::string::npos) {
    std::printf("numa: skipped: this machine has one NUMA node (online: %s); the numa suite "
                "boots a guest of two (tests/numa/meson.build)\n",
                nodes.empty() ? "unknown" : nodes.c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(coil::test::newShmLeakCheck());
  return RUN_ALL_TESTS();
}
