// What every way of learning the topology shares.
#include "topo/topology.h"

#include <algorithm>

namespace coil::topo {

std::optional<uint64_t> NumaDistances::between(unsigned from, unsigned to) const {
  const auto row = std::find(nodes.begin(), nodes.end(), from);
  const auto column = std::find(nodes.begin(), nodes.end(), to);
  if (row == nodes.end() || column == nodes.end()) return std::nullopt;
  return at(size_t(row - nodes.begin()), size_t(column - nodes.begin()));
}

std::string describeMissing(const Topology& topology) {
  std::string text;
  for (const std::string& part : topology.missing) {
    if (!text.empty()) text += "; ";
    text += part;
  }
  return text;
}

}  // namespace coil::topo
