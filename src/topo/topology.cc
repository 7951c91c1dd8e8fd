// What every way of learning the topology shares.
#include "topo/topology.h"

namespace coil::topo {

std::string describeMissing(const Topology& topology) {
  std::string text;
  for (const std::string& part : topology.missing) {
    if (!text.empty()) text += "; ";
    text += part;
  }
  return text;
}

}  // namespace coil::topo
