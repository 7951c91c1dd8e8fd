// coil-topo --json (see report.h). One object; absent values are null,
// CPU lists are strings in the kernel's form ("0-3,8"), PCI ids hex strings.
#include <cstdio>
#include <sstream>

#include "topo/cpu_list.h"
#include "topo/device_matrix.h"
#include "topo/ib_nic_match.h"
#include "topo/report.h"

namespace coil::topo {
namespace {

std::string str(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string strOrNull(const std::string& text) { return text.empty() ? "null" : str(text); }

std::string hex4(unsigned v) {
  char text[8];
  std::snprintf(text, sizeof text, "%04x", v);
  return str(text);
}

std::string list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

std::vector<std::string> strings(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  for (const std::string& t : texts) out.push_back(str(t));
  return out;
}

std::string numaOrNull(int node) { return node >= 0 ? std::to_string(node) : "null"; }

// The fields GPUs and NICs share, opening the object (the caller closes it).
std::string pciFields(const std::string& label, const PciIds& ids, const PciLocation& where) {
  return "{\"label\": " + str(label) + ", \"bus_id\": " + str(where.busId) +
         ", \"vendor\": " + hex4(ids.vendor) + ", \"device\": " + hex4(ids.device) +
         ", \"class\": " + hex4(ids.classId) + ", \"model\": " + strOrNull(ids.model) +
         ", \"numa_node\": " + numaOrNull(where.numaNode) +
         ", \"cpus\": " + str(formatCpuList(where.cpus)) +
         ", \"bridges\": " + list(strings(where.bridges));
}

std::string numaNodes(const Topology& t) {
  std::vector<std::string> items;
  for (const NumaNode& n : t.numaNodes)
    items.push_back("{\"os_index\": " + std::to_string(n.osIndex) +
                    ", \"cpus\": " + str(formatCpuList(n.cpus)) + ", \"memory_bytes\": " +
                    (n.memoryBytes ? std::to_string(*n.memoryBytes) : "null") +
                    ", \"cpus_outside_cpuset\": " + str(formatCpuList(n.cpusOutsideCpuset)) + "}");
  return list(items);
}

std::string distances(const Topology& t) {
  if (!t.numaDistances) return "null";
  const NumaDistances& d = *t.numaDistances;
  std::vector<std::string> nodes, rows;
  for (unsigned n : d.nodes) nodes.push_back(std::to_string(n));
  for (size_t r = 0; r < d.nodes.size(); ++r) {
    std::vector<std::string> row;
    for (size_t c = 0; c < d.nodes.size(); ++c) row.push_back(std::to_string(d.at(r, c)));
    rows.push_back(list(row));
  }
  return "{\"nodes\": " + list(nodes) + ", \"values\": " + list(rows) + "}";
}

std::string matrix(const Topology& t) {
  const DeviceMatrix m = deviceMatrix(t);
  std::vector<std::string> labels, rows;
  for (const MatrixDevice& d : m.devices) labels.push_back(str(d.label));
  for (size_t r = 0; r < m.devices.size(); ++r) {
    std::vector<std::string> row;
    for (size_t c = 0; c < m.devices.size(); ++c) row.push_back(str(pathName(m.at(r, c))));
    rows.push_back(list(row));
  }
  return "{\"devices\": " + list(labels) + ", \"paths\": " + list(rows) + "}";
}

std::string gids(const IbPort& p) {
  std::vector<std::string> items;
  for (const IbGid& g : p.gids)
    items.push_back("{\"index\": " + std::to_string(g.index) + ", \"type\": " + strOrNull(g.type) +
                    ", \"address\": " + str(g.address) +
                    ", \"interface\": " + strOrNull(g.netDevice) + "}");
  return list(items);
}

std::string rdma(const Report& report, const std::string& note) {
  if (!report.rdma) return "{\"read\": false, \"note\": " + str(note) + ", \"devices\": []}";
  std::vector<std::string> devices;
  for (const IbDevice& d : report.rdma->devices) {
    const NicMatch match = nicOf(report.topology, d);
    std::vector<std::string> ports;
    for (const IbPort& p : d.ports)
      ports.push_back(
          "{\"port\": " + std::to_string(p.number) + ", \"state\": " + strOrNull(p.state) +
          ", \"phys_state\": " + strOrNull(p.physState) +
          ", \"link_layer\": " + strOrNull(p.linkLayer) + ", \"rate\": " + strOrNull(p.rate) +
          ", \"active_mtu\": " + (p.activeMtu ? std::to_string(*p.activeMtu) : "null") +
          ", \"mtu_note\": " + str(p.mtuNote) + ", \"gids\": " + gids(p) + "}");
    devices.push_back(
        "{\"name\": " + str(d.name) + ", \"pci_bus_id\": " + strOrNull(d.pciBusId) +
        ", \"parent\": " + strOrNull(d.parent) +
        ", \"nic\": " + (match.nic >= 0 ? str("NIC" + std::to_string(match.nic)) : "null") +
        ", \"nic_match\": " + strOrNull(match.how) + ", \"ports\": " + list(ports) + "}");
  }
  return "{\"read\": true, \"directory\": " + str(report.rdma->directory) +
         ", \"directory_exists\": " + (report.rdma->directoryExists ? "true" : "false") +
         ", \"note\": " + strOrNull(note) + ", \"devices\": " + list(devices) + "}";
}

}  // namespace

std::string jsonReport(const Report& report) {
  const Topology& t = report.topology;
  const AbsenceNotes notes = absenceNotes(report);
  std::vector<std::string> l3, gpus, nics;
  for (const L3Cache& c : t.l3Caches)
    l3.push_back("{\"size_bytes\": " + std::to_string(c.sizeBytes) +
                 ", \"cpus\": " + str(formatCpuList(c.cpus)) + "}");
  for (size_t i = 0; i < t.gpus.size(); ++i)
    gpus.push_back(pciFields("GPU" + std::to_string(i), t.gpus[i].ids, t.gpus[i].where) + "}");
  for (size_t i = 0; i < t.nics.size(); ++i)
    nics.push_back(pciFields("NIC" + std::to_string(i), t.nics[i].ids, t.nics[i].where) +
                   ", \"name\": " + str(nicName(t.nics[i])) +
                   ", \"interfaces\": " + list(strings(t.nics[i].interfaces)) +
                   ", \"ib_devices\": " + list(strings(t.nics[i].ibDevices)) + "}");
  const auto countOrNull = [](int n) { return n > 0 ? std::to_string(n) : std::string("null"); };
  std::ostringstream o;
  o << "{\n  \"tool\": \"coil-topo\",\n  \"source\": " << str(t.source)
    << ",\n  \"host\": " << strOrNull(t.hostName)
    << ",\n  \"packages\": " << countOrNull(t.packages)
    << ",\n  \"cores\": " << countOrNull(t.cores) << ",\n  \"pus\": " << countOrNull(t.pus)
    << ",\n  \"numa_nodes\": " << numaNodes(t) << ",\n  \"numa_distances\": " << distances(t)
    << ",\n  \"l3_caches\": " << list(l3)
    << ",\n  \"pci_known\": " << (t.pciKnown ? "true" : "false") << ",\n  \"gpus\": " << list(gpus)
    << ",\n  \"nics\": " << list(nics) << ",\n  \"matrix\": " << matrix(t)
    << ",\n  \"rdma\": " << rdma(report, notes.rdma)
    << ",\n  \"absent\": " << list(strings(notes.all()))
    << ",\n  \"missing\": " << list(strings(t.missing)) << "\n}\n";
  return o.str();
}

}  // namespace coil::topo
