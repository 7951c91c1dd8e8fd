// "rank 3" or "ranks 1, 3, 4": the ranks a timeout message names as not
// arrived (flight recorder and timeout messages, see comm/flight_recorder.h).
#pragma once

#include <string>
#include <vector>

namespace coil {

inline std::string rankList(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return ranks.empty() ? "no rank" : out;
}

}  // namespace coil
