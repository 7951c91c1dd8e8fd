// What coil-topo prints: the topology, the GPU/NIC matrix and the RDMA
// ports, as text for people (textReport) or JSON for programs (jsonReport).
// Both say the same things, including what is absent and why.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topo/ib_ports.h"
#include "topo/topology.h"

namespace coil::topo {

struct Report {
  Topology topology;
  std::optional<IbScan> rdma;  // nullopt: the RDMA ports were not read
  std::string rdmaNotReadWhy;  // why not, when rdma is nullopt
};

/// Plain sentences about what is absent, each "" when there is nothing to
/// say: "no GPU found (...)", "no RDMA device under /sys/class/infiniband".
struct AbsenceNotes {
  std::string gpus;
  std::string nics;
  std::string rdma;
  std::vector<std::string> all() const;  // the non-empty ones
};
AbsenceNotes absenceNotes(const Report& report);

std::string textReport(const Report& report);
std::string jsonReport(const Report& report);

}  // namespace coil::topo
