#include "topo/process_topology.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <exception>
#include <utility>

#include "topo/cpu_list.h"

namespace coil::topo {
namespace {

struct Discovered {
  Topology topology;
  double milliseconds = 0;
};

Discovered discoverTimed(Scope scope) {
  Discovered d;
  const auto start = std::chrono::steady_clock::now();
  try {
    d.topology = discover(scope);
  } catch (const std::exception& e) {
    // coil runs without it: nothing is bound, placed or chosen by it.
    d.topology = Topology{};
    d.topology.source = "nothing (discovery failed)";
    d.topology.missing.push_back(std::string("the whole topology (") + e.what() + ")");
  }
  d.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return d;
}

const Discovered& cpusAndMemory() {
  static const Discovered d = discoverTimed(Scope::CpusAndMemory);  // thread-safe once
  return d;
}

}  // namespace

const Topology& processTopology() { return cpusAndMemory().topology; }
double discoveryMilliseconds() { return cpusAndMemory().milliseconds; }

const Topology& processTopologyWithDevices() {
  static const Discovered d = discoverTimed(Scope::WithDevices);
  return d.topology;
}

std::vector<unsigned> threadCpus() {
  // A dynamic set: a fixed cpu_set_t holds 1024 CPUs, and the kernel
  // refuses (EINVAL) a set smaller than its own CPU count.
  for (size_t n = std::max<long>(sysconf(_SC_NPROCESSORS_CONF), 64); n <= (1u << 16); n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (set == nullptr) return {};
    const size_t bytes = CPU_ALLOC_SIZE(n);
    std::vector<unsigned> cpus;
    const bool ok = sched_getaffinity(0, bytes, set) == 0;
    if (ok)
      for (size_t c = 0; c < n; ++c)
        if (CPU_ISSET_S(c, bytes, set)) cpus.push_back(static_cast<unsigned>(c));
    CPU_FREE(set);
    if (ok) return cpus;
    if (errno != EINVAL) return {};
  }
  return {};
}

std::vector<unsigned> numaNodesOf(const Topology& topology, const std::vector<unsigned>& cpus) {
  std::vector<unsigned> nodes;
  for (const NumaNode& n : topology.numaNodes)
    for (unsigned c : cpus)
      if (std::binary_search(n.cpus.begin(), n.cpus.end(), c)) {
        nodes.push_back(n.osIndex);
        break;
      }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

std::optional<unsigned> homeNode(const Topology& topology, const std::vector<unsigned>& cpus) {
  std::optional<unsigned> best;
  size_t bestCount = 0;
  for (const NumaNode& n : topology.numaNodes) {
    size_t count = 0;
    for (unsigned c : cpus) count += std::binary_search(n.cpus.begin(), n.cpus.end(), c);
    if (count > bestCount || (count == bestCount && count > 0 && n.osIndex < *best))
      best = n.osIndex, bestCount = count;
  }
  return best;
}

unsigned nearestNodeWithMemory(const Topology& topology, unsigned node) {
  const auto has = [](const NumaNode& n) { return n.memoryBytes && *n.memoryBytes > 0; };
  const auto self = std::find_if(topology.numaNodes.begin(), topology.numaNodes.end(),
                                 [&](const NumaNode& n) { return n.osIndex == node; });
  if (self == topology.numaNodes.end() || self->memoryBytes != uint64_t{0}) return node;
  // Without a matrix (or a row for them) all nodes are alike, and the
  // lowest index wins.
  std::optional<std::pair<uint64_t, unsigned>> best;  // (distance, node)
  for (const NumaNode& n : topology.numaNodes) {
    if (!has(n)) continue;
    const std::pair<uint64_t, unsigned> candidate{
        topology.numaDistances ? topology.numaDistances->between(node, n.osIndex).value_or(0) : 0,
        n.osIndex};
    if (!best || candidate < *best) best = candidate;
  }
  return best ? best->second : node;
}

std::string describeRankPlace(const Topology& topology, const std::vector<unsigned>& cpus) {
  std::string text = cpus.empty() ? "cpus unknown (sched_getaffinity failed)"
                                  : "cpus " + formatCpuList(cpus);
  const std::vector<unsigned> nodes = numaNodesOf(topology, cpus);
  if (nodes.empty())
    text += ", NUMA node unknown";
  else
    text += (nodes.size() == 1 ? ", NUMA node " : ", NUMA nodes ") + formatCpuList(nodes);
  if (const std::optional<unsigned> home = homeNode(topology, cpus)) {
    if (const unsigned memory = nearestNodeWithMemory(topology, *home); memory != *home)
      text += " (no local memory: its shm segments go to node " + std::to_string(memory) + ")";
  }
  const std::string missing = describeMissing(topology);
  if (!missing.empty()) text += "; not learnt: " + missing;
  return text;
}

}  // namespace coil::topo
