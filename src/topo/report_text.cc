// coil-topo's text output (see report.h).
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "topo/cpu_list.h"
#include "topo/device_matrix.h"
#include "topo/ib_nic_match.h"
#include "topo/report.h"

namespace coil::topo {
namespace {

std::string bytesText(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) value /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, value == static_cast<uint64_t>(value) ? "%.0f %s" : "%.1f %s",
                value, units[unit]);
  return text;
}

std::string countOrUnknown(int n) { return n > 0 ? std::to_string(n) : "unknown"; }

std::string pciIdsText(const PciIds& ids) {
  char text[32];
  std::snprintf(text, sizeof text, "[%04x:%04x] class %04x", ids.vendor, ids.device, ids.classId);
  return text + (ids.model.empty() ? std::string() : " " + ids.model);
}

// "2 x 32 MiB" for equal caches; sizes listed otherwise.
std::string l3Text(const std::vector<L3Cache>& caches) {
  if (caches.empty()) return "unknown";
  std::map<uint64_t, int> bySize;
  for (const L3Cache& c : caches) ++bySize[c.sizeBytes];
  std::string text;
  for (const auto& [size, n] : bySize)
    text += (text.empty() ? "" : " + ") + std::to_string(n) + " x " + bytesText(size);
  return text;
}

void header(std::ostringstream& o, const Topology& t) {
  o << "coil-topo: " << t.source << "\n"
    << "Host: " << (t.hostName.empty() ? "unknown" : t.hostName) << "\n"
    << "Packages: " << countOrUnknown(t.packages)
    << "   NUMA nodes: " << countOrUnknown(static_cast<int>(t.numaNodes.size()))
    << "   Cores: " << countOrUnknown(t.cores) << "   PUs: " << countOrUnknown(t.pus)
    << "   L3: " << l3Text(t.l3Caches) << "\n";
}

// "CPUs 0-1", "no CPUs (memory only)", or, in a cpuset that leaves some
// out, "CPUs 0-1 (2-3 outside this process's cpuset)".
std::string nodeCpusText(const NumaNode& n) {
  const std::string outside = formatCpuList(n.cpusOutsideCpuset);
  if (n.cpus.empty())
    return outside.empty() ? "no CPUs (memory only)"
                           : "no CPUs in this process's cpuset (" + outside + " outside it)";
  return "CPUs " + formatCpuList(n.cpus) +
         (outside.empty() ? "" : " (" + outside + " outside this process's cpuset)");
}

void numa(std::ostringstream& o, const Topology& t) {
  o << "\nNUMA nodes:\n";
  for (const NumaNode& n : t.numaNodes)
    o << "  node " << n.osIndex << ": " << nodeCpusText(n) << ", "
      << (!n.memoryBytes        ? "memory unknown"
          : *n.memoryBytes == 0 ? "no local memory"
                                : bytesText(*n.memoryBytes))
      << "\n";
  if (t.numaNodes.empty()) o << "  (none known)\n";
  if (!t.numaDistances) {
    o << "NUMA distances: none (see \"Not learnt\" below)\n";
    return;
  }
  const NumaDistances& d = *t.numaDistances;
  o << "NUMA distances (relative; 10 = local):\n        ";
  char cell[32];
  for (unsigned node : d.nodes) {
    std::snprintf(cell, sizeof cell, "%7s", ("node" + std::to_string(node)).c_str());
    o << cell;
  }
  o << "\n";
  for (size_t r = 0; r < d.nodes.size(); ++r) {
    std::snprintf(cell, sizeof cell, "  %-6s", ("node" + std::to_string(d.nodes[r])).c_str());
    o << cell;
    for (size_t c = 0; c < d.nodes.size(); ++c) {
      std::snprintf(cell, sizeof cell, "%7llu", static_cast<unsigned long long>(d.at(r, c)));
      o << cell;
    }
    o << "\n";
  }
}

std::string numaText(int node) { return node >= 0 ? std::to_string(node) : "N/A"; }

void matrix(std::ostringstream& o, const Report& report, const AbsenceNotes& notes) {
  const Topology& t = report.topology;
  o << "\nGPUs and NICs (PCI paths, in the manner of nvidia-smi topo -m):\n";
  if (!notes.gpus.empty()) o << "  " << notes.gpus << "\n";
  if (!notes.nics.empty()) o << "  " << notes.nics << "\n";
  const DeviceMatrix m = deviceMatrix(t);
  if (m.devices.empty()) return;
  char cell[64];
  auto column = [&](const std::string& text) {
    std::snprintf(cell, sizeof cell, "%-7s", text.c_str());
    o << cell;
  };
  o << "\n";
  column("");
  for (const MatrixDevice& d : m.devices) column(d.label);
  o << "CPU Affinity    NUMA Affinity\n";
  for (size_t r = 0; r < m.devices.size(); ++r) {
    column(m.devices[r].label);
    for (size_t c = 0; c < m.devices.size(); ++c) column(std::string(" ") + pathName(m.at(r, c)));
    std::snprintf(cell, sizeof cell, "%-16s", formatCpuList(m.devices[r].where.cpus).c_str());
    o << cell << numaText(m.devices[r].where.numaNode) << "\n";
  }
  o << "\nLegend:\n";
  for (PciPath p : {PciPath::kSelf, PciPath::kSys, PciPath::kNode, PciPath::kPhb, PciPath::kPxb,
                    PciPath::kPix}) {
    std::snprintf(cell, sizeof cell, "  %-4s = ", pathName(p));
    o << cell << pathMeaning(p) << "\n";
  }
  o << "  (NVLink is not seen: that needs NVIDIA's NVML.)\n\nDevices:\n";
  for (size_t i = 0; i < t.gpus.size(); ++i)
    o << "  GPU" << i << ": " << t.gpus[i].where.busId << " " << pciIdsText(t.gpus[i].ids) << "\n";
  for (size_t i = 0; i < t.nics.size(); ++i) {
    const Nic& n = t.nics[i];
    o << "  NIC" << i << ": " << nicName(n) << " (" << n.where.busId << " " << pciIdsText(n.ids);
    for (size_t k = 1; k < n.interfaces.size(); ++k) o << "; also " << n.interfaces[k];
    if (!n.ibDevices.empty()) {
      o << "; RDMA";
      for (const std::string& ib : n.ibDevices) o << " " << ib;
    }
    o << ")\n";
  }
}

void rdma(std::ostringstream& o, const Report& report, const AbsenceNotes& notes) {
  o << "\nRDMA devices";
  if (report.rdma) o << " (" << report.rdma->directory << ")";
  o << ":\n";
  if (!notes.rdma.empty()) o << "  " << notes.rdma << "\n";
  if (!report.rdma) return;
  char cell[96];
  for (const IbDevice& d : report.rdma->devices) {
    o << "  " << d.name << ": ";
    if (!d.pciBusId.empty())
      o << "PCI " << d.pciBusId;
    else
      o << "software device" << (d.parent.empty() ? "" : " over " + d.parent);
    const NicMatch match = nicOf(report.topology, d);
    if (match.nic >= 0)
      o << ", NIC" << match.nic << " (" << match.how << ")";
    else
      o << ", not matched to a NIC of the topology";
    o << "\n";
    for (const IbPort& p : d.ports) {
      o << "    port " << p.number << ": " << (p.state.empty() ? "state unknown" : p.state);
      if (!p.physState.empty()) o << " (" << p.physState << ")";
      o << ", link layer " << (p.linkLayer.empty() ? "unknown" : p.linkLayer) << ", active MTU ";
      if (p.activeMtu)
        o << *p.activeMtu << " (" << p.mtuNote << ")";
      else
        o << p.mtuNote;
      if (!p.rate.empty()) o << ", rate " << p.rate;
      o << "\n";
      if (p.gids.empty()) {
        o << "      no GID set\n";
        continue;
      }
      std::snprintf(cell, sizeof cell, "      %-5s %-11s %-40s %s\n", "GID", "type", "address",
                    "interface");
      o << cell;
      for (const IbGid& g : p.gids) {
        std::snprintf(cell, sizeof cell, "      %-5d %-11s %-40s %s\n", g.index,
                      g.type.empty() ? "-" : g.type.c_str(), g.address.c_str(),
                      g.netDevice.empty() ? "-" : g.netDevice.c_str());
        o << cell;
      }
    }
  }
}

}  // namespace

std::string textReport(const Report& report) {
  std::ostringstream o;
  const AbsenceNotes notes = absenceNotes(report);
  header(o, report.topology);
  numa(o, report.topology);
  matrix(o, report, notes);
  rdma(o, report, notes);
  if (!report.topology.missing.empty()) {
    o << "\nNot learnt:\n";
    for (const std::string& m : report.topology.missing) o << "  " << m << "\n";
  }
  return o.str();
}

}  // namespace coil::topo
