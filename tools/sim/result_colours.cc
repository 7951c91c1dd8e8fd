#include "result_colours.h"

#include <bit>
#include <cmath>
#include <cstdio>

namespace coil::sim {

Contributors wantedContributors(const Simulation& s, int rank, size_t o) {
  const Request& req = s.request;
  // As simulate() asks: a reduce-scatter's output element 0 stands for
  // element rank × count of the whole vector.
  size_t origin =
      req.algorithm && req.algorithm->outputAtOwnBlock ? static_cast<size_t>(rank) * req.count : 0;
  if (req.algorithm && req.algorithm->layout == algo::Layout::kScratch) {
    // In place on all n blocks: only this rank's block is its result.
    const size_t mine = static_cast<size_t>(rank) * req.count;
    if (o < mine || o >= mine + req.count) return 0;
    o -= mine;
  }
  Contributors want = 0;
  for (const auto& [q, i] : algo::expectedContributions(req.collective, rank, req.nranks,
                                                        req.count, req.root, o + origin))
    want |= Contributors{1} << q;
  return want;
}

int resultPercent(const std::vector<Contributors>& have, const std::vector<Contributors>& want) {
  int held = 0, wanted = 0;
  for (size_t i = 0; i < have.size() && i < want.size(); ++i) {
    held += std::popcount(have[i] & want[i]);
    wanted += std::popcount(want[i]);
  }
  if (wanted == 0) return -1;
  return static_cast<int>(std::lround(100.0 * held / wanted));
}

std::string resultColour(int percent) {
  if (percent < 0) return "#d9d9d9";
  const int from[3] = {0xff, 0xff, 0xff}, to[3] = {0x08, 0x51, 0x9c};
  char buf[8];
  int c[3];
  for (int k = 0; k < 3; ++k)
    c[k] = from[k] + static_cast<int>(std::lround((to[k] - from[k]) * percent / 100.0));
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c[0], c[1], c[2]);
  return buf;
}

std::string xmlEscape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += ch;
    }
  }
  return out;
}

// Appended piecewise: GCC 12 warns (-Wrestrict, a false positive) on
// "[" + std::to_string(...) at -O3.
std::string span(size_t offset, size_t count) {
  std::string s = "[";
  s += std::to_string(offset);
  s += ",+";
  s += std::to_string(count);
  s += ")";
  return s;
}

}  // namespace coil::sim
