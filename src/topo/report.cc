#include "topo/report.h"

namespace coil::topo {

std::vector<std::string> AbsenceNotes::all() const {
  std::vector<std::string> notes;
  for (const std::string* n : {&gpus, &nics, &rdma})
    if (!n->empty()) notes.push_back(*n);
  return notes;
}

AbsenceNotes absenceNotes(const Report& report) {
  AbsenceNotes notes;
  const Topology& t = report.topology;
  if (!t.pciKnown) {
    notes.gpus = "GPUs not looked for (no PCI information without hwloc)";
    notes.nics = "NICs not looked for (no PCI information without hwloc)";
  } else {
    if (t.gpus.empty()) notes.gpus = "no GPU found (hwloc saw no NVIDIA PCI display device)";
    if (t.nics.empty()) notes.nics = "no NIC found (hwloc saw no PCI network device)";
  }
  if (!report.rdma) {
    notes.rdma = "RDMA ports not read (" + report.rdmaNotReadWhy + ")";
  } else if (report.rdma->devices.empty()) {
    notes.rdma =
        "no RDMA device under " + report.rdma->directory +
        (report.rdma->directoryExists ? "" : " (no such directory: no RDMA driver loaded)");
  }
  return notes;
}

}  // namespace coil::topo
