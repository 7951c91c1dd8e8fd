#include "topo/topology_sysfs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "topo/cpu_list.h"

namespace coil::topo {
namespace {

namespace fs = std::filesystem;

// The file's first line; nullopt when it cannot be read.
std::optional<std::string> firstLine(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<long> number(const fs::path& file) {
  const auto line = firstLine(file);
  if (!line) return std::nullopt;
  try {
    return std::stol(*line);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// "Node 0 MemTotal:       14117076 kB" in nodeN/meminfo.
std::optional<uint64_t> nodeMemoryBytes(const fs::path& meminfo) {
  std::ifstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find("MemTotal:");
    if (at == std::string::npos) continue;
    std::istringstream rest(line.substr(at + 9));
    uint64_t kib = 0;
    std::string unit;
    if (rest >> kib >> unit && unit == "kB") return kib * 1024;  // 0: a memoryless node
  }
  return std::nullopt;
}

// nodeN directories, by N.
std::vector<std::pair<unsigned, fs::path>> nodeDirectories(const fs::path& nodeRoot) {
  std::vector<std::pair<unsigned, fs::path>> nodes;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(nodeRoot, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.starts_with("node") &&
        name.find_first_not_of("0123456789", 4) == std::string::npos)
      nodes.emplace_back(static_cast<unsigned>(std::stoul(name.substr(4))), entry.path());
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace

Topology minimalFromSysfs(const std::string& sysRoot) {
  const fs::path cpuRoot = fs::path(sysRoot) / "devices/system/cpu";
  const fs::path nodeRoot = fs::path(sysRoot) / "devices/system/node";
  Topology topo;
  topo.source = "Linux sysfs under " + sysRoot;
  const auto onlineText = firstLine(cpuRoot / "online");
  const auto online = onlineText ? parseCpuList(*onlineText) : std::nullopt;
  if (!online || online->empty())
    fail(
        coilSystemError, "cannot read the online CPUs from ", (cpuRoot / "online").string(),
        onlineText ? " (not a CPU list: \"" + *onlineText + "\")" : std::string(" (no such file)"));
  topo.pus = static_cast<int>(online->size());

  std::set<long> packages;
  std::set<std::pair<long, long>> cores;
  bool allKnown = true;
  for (unsigned cpu : *online) {
    const fs::path dir = cpuRoot / ("cpu" + std::to_string(cpu)) / "topology";
    const auto package = number(dir / "physical_package_id");
    const auto core = number(dir / "core_id");
    if (!package || !core) {
      allKnown = false;
      continue;
    }
    packages.insert(*package);
    cores.insert({*package, *core});
  }
  if (allKnown) {
    topo.packages = static_cast<int>(packages.size());
    topo.cores = static_cast<int>(cores.size());
  } else {
    topo.missing.push_back("packages and cores (no cpuN/topology in " + cpuRoot.string() + ")");
  }

  for (const auto& [index, dir] : nodeDirectories(nodeRoot)) {
    const auto text = firstLine(dir / "cpulist");
    const auto cpus = text ? parseCpuList(*text) : std::nullopt;
    topo.numaNodes.push_back(
        {index, cpus.value_or(std::vector<unsigned>{}), nodeMemoryBytes(dir / "meminfo")});
    if (!cpus) topo.missing.push_back("CPUs of NUMA node " + std::to_string(index));
    if (!topo.numaNodes.back().memoryBytes)
      topo.missing.push_back("memory of NUMA node " + std::to_string(index));
  }
  if (topo.numaNodes.empty())
    topo.missing.push_back("NUMA nodes (no " + nodeRoot.string() + "/nodeN: kernel without NUMA?)");
  topo.missing.push_back("L3 caches, PCI devices (NICs, GPUs) and NUMA distances (need hwloc)");
  return topo;
}

}  // namespace coil::topo
