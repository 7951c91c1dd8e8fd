#include "topo/placement.h"

#include <fstream>
#include <string>

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "core/log.h"
#include "topo/process_topology.h"

namespace coil::topo {
namespace {
// <numaif.h> is libnuma's header; the kernel ABI is this value and a
// bitmask of unsigned longs.
constexpr int kMpolPreferred = 1;
constexpr size_t kBitsPerLong = 8 * sizeof(unsigned long);
}  // namespace

std::optional<unsigned> placementNode(const Topology& topology,
                                      const std::vector<unsigned>& cpus) {
  if (topology.numaNodes.size() < 2) return std::nullopt;
  const std::optional<unsigned> home = homeNode(topology, cpus);
  if (!home) return std::nullopt;
  return nearestNodeWithMemory(topology, *home);
}

int preferNode(void* addr, size_t bytes, unsigned node) noexcept {
  std::vector<unsigned long> mask(node / kBitsPerLong + 1, 0);
  mask[node / kBitsPerLong] |= 1ul << (node % kBitsPerLong);
  // maxnode: the kernel reads maxnode - 1 bits (an old off-by-one kept for
  // its ABI), so pass one more than the bits given.
  const unsigned long maxnode = mask.size() * kBitsPerLong + 1;
  if (syscall(SYS_mbind, addr, bytes, kMpolPreferred, mask.data(), maxnode, 0u) != 0) return errno;
  return 0;
}

namespace {

// True when the kernel has more than one NUMA node online ("0" is one,
// "0-1" two): read once, so that a one-node machine never pays for a
// topology discovery just to learn there is nothing to place.
bool severalNumaNodes() {
  static const bool several = [] {
    std::ifstream online("/sys/devices/system/node/online");
    std::string nodes;
    std::getline(online, nodes);
    return nodes.find_first_of(",-") != std::string::npos;
  }();
  return several;
}

}  // namespace

void placeOnCallersNode(void* addr, size_t bytes, const char* what) noexcept {
  try {
    if (!severalNumaNodes()) return;
    const Topology& topology = processTopology();
    const std::vector<unsigned> cpus = threadCpus();
    const std::optional<unsigned> node = placementNode(topology, cpus);
    if (!node) return;
    if (const int err = preferNode(addr, bytes, *node); err != 0) {
      COIL_WARN(kShm, what, ": not placed on NUMA node ", *node, " (mbind: ", std::strerror(err),
                "); its pages go where they are first touched");
      return;
    }
    COIL_INFO(kShm, what, ": ", bytes >> 10, " KiB placed on NUMA node ", *node,
              *node == homeNode(topology, cpus)
                  ? " (the creating rank's)"
                  : " (the nearest with memory to the creating rank's)");
  } catch (const std::exception& e) {
    COIL_WARN(kShm, what, ": not placed: ", e.what());
  }
}

}  // namespace coil::topo
