// What the diagram (svg.cc), the page (html.cc) and the final check
// (simulation.cc) share, so that all three judge and label an element
// alike: how much of the collective's result an output holds, its colour,
// span labels and XML escaping.
#pragma once

#include <string>
#include <vector>

#include "simulation.h"

namespace coil::sim {

/// The ranks whose input output element `o` of `rank` holds when the
/// collective completes (rank bits of algo::expectedContributions); 0 where
/// the result is unspecified (a non-root rank of reduce or gather).
Contributors wantedContributors(const Simulation& s, int rank, size_t o);

/// Percent (0..100) of the wanted contributions that `have` holds, summed
/// over elements; -1 when nothing is wanted (the output is unspecified).
int resultPercent(const std::vector<Contributors>& have, const std::vector<Contributors>& want);

/// "#rrggbb" on a white → blue scale for a resultPercent; grey for -1.
std::string resultColour(int percent);

/// "[4,+2)": an element span, as the diagram and the page label messages.
std::string span(size_t offset, size_t count);

/// Text for XML character data and attribute values.
std::string xmlEscape(const std::string& text);

}  // namespace coil::sim
