// discover() and fromXml() with hwloc (built when Meson finds hwloc; else
// topology_absent.cc). Everything hwloc gives is copied into plain values
// here, so no other file includes hwloc.h.
#include <hwloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "core/error.h"
#include "topo/topology.h"

namespace coil::topo {
namespace {

// One hwloc topology, destroyed whatever happens while it is read.
class HwlocTopology {
 public:
  HwlocTopology() {
    if (hwloc_topology_init(&topology_) != 0) failErrno("hwloc_topology_init", errno);
  }
  // PCI devices, bridges and OS devices (network interfaces, verbs devices)
  // are left out by default; the bridges give the PCI tree.
  void keepDevices() { hwloc_topology_set_io_types_filter(topology_, HWLOC_TYPE_FILTER_KEEP_ALL); }
  ~HwlocTopology() { hwloc_topology_destroy(topology_); }
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
};

// The library that did the discovery (it records itself in the root
// object); hwloc_get_api_version() would give the API's version, 2.8.0 for 2.9.
std::string hwlocVersion(hwloc_topology_t t) {
  const char* version = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "hwlocVersion");
  return version != nullptr ? version : HWLOC_VERSION;
}

std::vector<unsigned> cpusOf(hwloc_const_bitmap_t set) {
  std::vector<unsigned> cpus;
  // An infinite set (hwloc_bitmap_weight -1) is not a list of CPUs.
  if (set == nullptr || hwloc_bitmap_weight(set) <= 0) return cpus;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i))
    cpus.push_back(static_cast<unsigned>(i));
  return cpus;
}

int count(hwloc_topology_t t, hwloc_obj_type_t type) {
  const int n = hwloc_get_nbobjs_by_type(t, type);
  return n > 0 ? n : 0;
}

std::string busIdOf(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", unsigned{a.domain}, unsigned{a.bus},
                unsigned{a.dev}, unsigned{a.func});
  return text;
}

// Unique within the machine: a PCI-PCI bridge by its own bus id; a host
// bridge, which has none, by the buses behind it.
std::string bridgeName(hwloc_obj_t bridge) {
  const auto& a = bridge->attr->bridge;
  if (a.upstream_type == HWLOC_OBJ_BRIDGE_PCI) return "bridge " + busIdOf(a.upstream.pci);
  char text[48];
  std::snprintf(text, sizeof text, "host %04x:[%02x-%02x]", unsigned{a.downstream.pci.domain},
                unsigned{a.downstream.pci.secondary_bus},
                unsigned{a.downstream.pci.subordinate_bus});
  return text;
}

PciLocation locationOf(hwloc_topology_t t, hwloc_obj_t pci) {
  PciLocation where;
  where.busId = busIdOf(pci->attr->pcidev);
  for (hwloc_obj_t p = pci->parent; p != nullptr && p->type == HWLOC_OBJ_BRIDGE; p = p->parent)
    where.bridges.insert(where.bridges.begin(), bridgeName(p));
  // I/O objects hang below the CPU-side object they are local to (a
  // package, a NUMA node's parent, or the machine).
  if (hwloc_obj_t cpuSide = hwloc_get_non_io_ancestor_obj(t, pci)) {
    where.cpus = cpusOf(cpuSide->cpuset);
    if (cpuSide->nodeset != nullptr && hwloc_bitmap_weight(cpuSide->nodeset) == 1)
      where.numaNode = hwloc_bitmap_first(cpuSide->nodeset);
  }
  return where;
}

PciIds idsOf(hwloc_obj_t pci) {
  PciIds ids;
  ids.vendor = pci->attr->pcidev.vendor_id;
  ids.device = pci->attr->pcidev.device_id;
  ids.classId = pci->attr->pcidev.class_id;
  if (const char* model = hwloc_obj_get_info_by_name(pci, "PCIDevice")) ids.model = model;
  return ids;
}

constexpr uint16_t kNvidia = 0x10de;
bool isDisplayClass(uint16_t classId) { return (classId >> 8) == 0x03; }
bool isNetworkClass(uint16_t classId) { return (classId >> 8) == 0x02; }

void readPciDevices(hwloc_topology_t t, Topology& topo) {
  topo.pciKnown = true;
  for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(t, pci)) != nullptr;) {
    const PciIds ids = idsOf(pci);
    if (ids.vendor == kNvidia && isDisplayClass(ids.classId)) {
      topo.gpus.push_back(Gpu{ids, locationOf(t, pci)});
      continue;
    }
    Nic nic{ids, {}, {}, {}};
    for (hwloc_obj_t c = pci->io_first_child; c != nullptr; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) nic.interfaces.push_back(c->name);
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) nic.ibDevices.push_back(c->name);
    }
    if (nic.interfaces.empty() && nic.ibDevices.empty() && !isNetworkClass(ids.classId)) continue;
    nic.where = locationOf(t, pci);
    topo.nics.push_back(std::move(nic));
  }
  if (!topo.gpus.empty()) {
    topo.missing.push_back(
        "CUDA device numbers of the GPUs (this hwloc has no CUDA plugin; "
        "match GPUs by PCI bus id)");
    topo.missing.push_back("NVLink connections between GPUs (need NVIDIA's NVML)");
  }
}

void readNumaDistances(hwloc_topology_t t, Topology& topo) {
  constexpr unsigned kMax = 8;
  hwloc_distances_s* found[kMax] = {};
  unsigned nr = kMax;
  if (hwloc_distances_get_by_type(t, HWLOC_OBJ_NUMANODE, &nr, found, 0, 0) != 0) nr = 0;
  nr = std::min(nr, kMax);
  // Linux gives one latency-like matrix (the ACPI SLIT); prefer it when
  // several are stored (an XML file may add bandwidths).
  hwloc_distances_s* chosen = nr > 0 ? found[0] : nullptr;
  for (unsigned i = 0; i < nr; ++i)
    if (found[i]->kind & HWLOC_DISTANCES_KIND_MEANS_LATENCY) {
      chosen = found[i];
      break;
    }
  if (chosen != nullptr) {
    NumaDistances d;
    for (unsigned i = 0; i < chosen->nbobjs; ++i) d.nodes.push_back(chosen->objs[i]->os_index);
    d.values.assign(chosen->values, chosen->values + size_t{chosen->nbobjs} * chosen->nbobjs);
    topo.numaDistances = std::move(d);
  }
  for (unsigned i = 0; i < nr; ++i) hwloc_distances_release(t, found[i]);
  if (!topo.numaDistances)
    topo.missing.push_back(std::string("NUMA distances (hwloc has no matrix") +
                           (topo.numaNodes.size() <= 1 ? ": usual with one NUMA node)" : ")"));
}

Topology read(hwloc_topology_t t, std::string source, Scope scope) {
  Topology topo;
  topo.source = std::move(source);
  hwloc_obj_t root = hwloc_get_root_obj(t);
  if (const char* host = hwloc_obj_get_info_by_name(root, "HostName"))
    topo.hostName = host;
  else
    topo.missing.push_back("host name (hwloc recorded no HostName)");
  topo.packages = count(t, HWLOC_OBJ_PACKAGE);
  topo.cores = count(t, HWLOC_OBJ_CORE);
  topo.pus = count(t, HWLOC_OBJ_PU);
  if (topo.packages == 0) topo.missing.push_back("packages (hwloc found no Package object)");
  if (topo.cores == 0) topo.missing.push_back("cores (hwloc found no Core object)");
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n));) {
    // complete_cpuset keeps the PUs the process's cpuset leaves out.
    std::vector<unsigned> outside;
    for (unsigned cpu : cpusOf(n->complete_cpuset))
      if (!hwloc_bitmap_isset(n->cpuset, cpu)) outside.push_back(cpu);
    topo.numaNodes.push_back(
        {n->os_index, cpusOf(n->cpuset), n->attr->numanode.local_memory, std::move(outside)});
  }
  for (hwloc_obj_t c = nullptr; (c = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_L3CACHE, c));)
    topo.l3Caches.push_back({c->attr->cache.size, cpusOf(c->cpuset)});
  if (topo.l3Caches.empty()) topo.missing.push_back("L3 caches (hwloc found none)");
  if (scope == Scope::WithDevices) readPciDevices(t, topo);
  readNumaDistances(t, topo);
  return topo;
}

}  // namespace

Topology discover(Scope scope) {
  HwlocTopology t;
  if (scope == Scope::WithDevices) t.keepDevices();
  // The PCI tree from sysfs (hwloc's linux component), not through the
  // libpciaccess plugin: that plugin leaks its pci.ids name table on every
  // load (LeakSanitizer reports ~600 KiB in a coil test), for the device
  // model names only. The PCI ids and classes are read either way.
  hwloc_topology_set_components(t.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  if (hwloc_topology_load(t.get()) != 0)
    failErrno("hwloc could not read this machine's topology", errno);
  return read(t.get(), "hwloc " + hwlocVersion(t.get()) + " on this machine", scope);
}

Topology fromXml(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) failErrno("hwloc XML file " + path, errno);
  HwlocTopology t;
  t.keepDevices();
  if (hwloc_topology_set_xml(t.get(), path.c_str()) != 0)
    failErrno("hwloc cannot read " + path + " as an hwloc XML topology", errno);
  if (hwloc_topology_load(t.get()) != 0)
    fail(coilInvalidArgument, "hwloc could not load ", path,
         " (not an hwloc XML topology? hwloc may have said why above)");
  return read(t.get(), "hwloc XML file " + path, Scope::WithDevices);
}

}  // namespace coil::topo
