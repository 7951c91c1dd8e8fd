// coil::topo::Topology — what this machine is made of, as plain values.
//
// One place learns the machine (hwloc when coil was built with it:
// topology_hwloc.cc; a minimal reading of /sys otherwise:
// topology_absent.cc), so that what uses it works from values it can
// print, compare and test, never from hwloc objects. libcoil uses it
// through process_topology.h (learnt once per process) for CPU binding,
// shm placement and the ib NIC choice. Whatever could not be learnt is
// said in `missing`, one sentence each, rather than left as a silent zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coil::topo {

/// A NUMA node: memory and the CPUs closest to it.
struct NumaNode {
  unsigned osIndex = 0;        // the kernel's node number (/sys/devices/system/node/nodeN)
  std::vector<unsigned> cpus;  // OS indexes of its local PUs, ascending
  // Local memory: 0 for a node with none (its CPUs allocate from the nearest
  // node with memory, as the kernel does), nullopt when not learnt.
  std::optional<uint64_t> memoryBytes;
  // Its PUs outside this process's cpuset (a container's or a batch job's
  // cgroup): hwloc leaves them out of `cpus`, so a node whose CPUs are all
  // outside has empty `cpus` without being a node of memory only.
  std::vector<unsigned> cpusOutsideCpuset = {};
};

/// A last-level (L3) cache and the PUs that share it.
struct L3Cache {
  uint64_t sizeBytes = 0;
  std::vector<unsigned> cpus;
};

/// Where a PCI device sits, enough to say how far apart two devices are.
struct PciLocation {
  std::string busId;  // "0000:3b:00.0" (domain:bus:device.function)
  /// The bridges above it, from its host bridge down to its parent, each
  /// named uniquely ("host 0000:[3a-3f]", "bridge 0000:3a:00.0"). Empty
  /// when the PCI tree is not known.
  std::vector<std::string> bridges;
  int numaNode = -1;           // OS index of its one local NUMA node; -1: unknown or several
  std::vector<unsigned> cpus;  // PUs local to it (OS indexes), ascending
};

/// PCI identity common to the devices listed.
struct PciIds {
  uint16_t vendor = 0;  // 0x10de NVIDIA, 0x15b3 Mellanox, ...
  uint16_t device = 0;
  uint16_t classId = 0;  // 0x0302 3D controller, 0x0200 Ethernet, 0x0207 InfiniBand, ...
  std::string model;     // hwloc's PCIDevice text when it knows the name (an XML file may
                         // carry it; discover() does not load the pci.ids plugin); may be empty
};

/// A network adapter: a PCI device with a network interface or an RDMA
/// (InfiniBand verbs) device on it.
struct Nic {
  PciIds ids;
  PciLocation where;
  std::vector<std::string> interfaces;  // network interfaces ("eth0", "ib0")
  std::vector<std::string> ibDevices;   // verbs devices ("mlx5_0"); empty: none seen on it
};

/// An NVIDIA GPU, known by its PCI function only: Debian's hwloc has no CUDA
/// plugin, so the CUDA device index is not known here; match by bus id
/// (cudaDeviceGetPCIBusId) where it is needed.
struct Gpu {
  PciIds ids;
  PciLocation where;
};

/// Relative distances between NUMA nodes (the ACPI SLIT: 10 = local).
struct NumaDistances {
  std::vector<unsigned> nodes;   // OS indexes, in row/column order
  std::vector<uint64_t> values;  // row-major, nodes.size() squared
  uint64_t at(size_t row, size_t column) const { return values[row * nodes.size() + column]; }
  /// From node `from` to node `to`, by OS index; nullopt when either is
  /// not in the matrix.
  std::optional<uint64_t> between(unsigned from, unsigned to) const;
};

struct Topology {
  std::string
      source;  // how it was learnt: "hwloc 2.9.0 on this machine", "hwloc XML file x.xml", ...
  std::string hostName;  // empty when unknown
  int packages = 0;      // 0: unknown (see missing)
  int cores = 0;
  int pus = 0;  // hardware threads
  std::vector<NumaNode> numaNodes;
  std::vector<L3Cache> l3Caches;
  bool pciKnown = false;  // false: nics and gpus were not looked for (not: there are none)
  std::vector<Nic> nics;
  std::vector<Gpu> gpus;
  std::optional<NumaDistances> numaDistances;  // nullopt: none given by the firmware or the file
  std::vector<std::string> missing;            // what could not be learnt, one sentence each
};

/// How much of the machine discover() looks at.
enum class Scope {
  /// PUs, cores, caches, NUMA nodes and their distances: what thread
  /// binding and shm placement use. pciKnown stays false.
  CpusAndMemory,
  /// All that, and the PCI devices (NICs, GPUs) with the bridges above
  /// them. hwloc's I/O discovery reads every PCI function and network
  /// interface in /sys: on the 2-CPU CI VM it took the load from 8 to 25
  /// ms of CPU (45 ms more wall time), in every process, and a server
  /// with hundreds of PCI functions pays more.
  WithDevices,
};

/// This machine's topology. Never throws for a part it cannot learn (that
/// part is named in `missing`); throws coil::Error when nothing can be read.
Topology discover(Scope scope = Scope::WithDevices);

/// The topology an hwloc XML file describes (`lstopo --of xml`, or
/// hwloc_topology_export_xml): for tests, and to look at another machine.
/// Throws coil::Error naming the file when it cannot be loaded.
Topology fromXml(const std::string& path);

/// The `missing` sentences as one text ("" when nothing is missing).
std::string describeMissing(const Topology& topology);

}  // namespace coil::topo
