// discover() and fromXml() when coil was built without hwloc (Meson picks
// this file instead of topology_hwloc.cc): what /sys gives, and a plain
// statement of why the rest is missing.
#include <unistd.h>

#include "core/error.h"
#include "topo/topology.h"
#include "topo/topology_sysfs.h"

namespace coil::topo {
namespace {
constexpr const char* kNoHwloc =
    "hwloc not available at build time: install libhwloc-dev and rebuild (Meson option -Dhwloc)";
}  // namespace

Topology discover(Scope) {  // /sys's PCI tree is not read without hwloc
  Topology topo = minimalFromSysfs("/sys");
  topo.source = "Linux sysfs (hwloc not available at build time)";
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0)
    topo.hostName = host;
  else
    topo.missing.push_back("host name (gethostname failed)");
  topo.missing.insert(topo.missing.begin(), kNoHwloc);
  return topo;
}

Topology fromXml(const std::string& path) {
  fail(coilInvalidUsage, "cannot read ", path, ": ", kNoHwloc);
}

}  // namespace coil::topo
