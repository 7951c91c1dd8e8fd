#include "bootstrap/slurm_nodelist.h"

#include <cctype>
#include <cstdint>

#include "core/error.h"

namespace coil {
namespace {

bool allDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Compares two decimal strings by value (zero padding aside).
bool lessByValue(std::string_view a, std::string_view b) {
  while (a.size() > 1 && a.front() == '0') a.remove_prefix(1);
  while (b.size() > 1 && b.front() == '0') b.remove_prefix(1);
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

// Checks one bracketed range list ("01-04,07", without the brackets) and
// returns its first value as written.
std::string_view firstOfRange(std::string_view range) {
  const std::string shown = "'[" + std::string(range) + "]'";
  if (range.empty()) fail(coilInvalidUsage, "an empty range ", shown);
  std::string_view first;
  size_t start = 0;
  while (start <= range.size()) {
    size_t end = range.find(',', start);
    if (end == std::string_view::npos) end = range.size();
    std::string_view item = range.substr(start, end - start);
    size_t dash = item.find('-');
    std::string_view lo = item.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    if (!allDigits(lo) || !allDigits(hi))
      fail(coilInvalidUsage, "a range that is not numbers: ", shown);
    if (lessByValue(hi, lo)) fail(coilInvalidUsage, "a range that runs backwards: ", shown);
    if (first.empty()) first = lo;
    start = end + 1;
  }
  return first;
}

}  // namespace

std::string firstSlurmHost(std::string_view list) {
  if (list.empty()) fail(coilInvalidUsage, "an empty host list");
  std::string host;
  size_t i = 0;
  // The first entry ends at the first comma outside brackets.
  while (i < list.size() && list[i] != ',') {
    if (list[i] == ']') fail(coilInvalidUsage, "']' without its '['");
    if (list[i] != '[') {
      host += list[i++];
      continue;
    }
    size_t close = list.find(']', i + 1);
    if (close == std::string_view::npos) fail(coilInvalidUsage, "'[' without its ']'");
    std::string_view range = list.substr(i + 1, close - i - 1);
    if (range.find('[') != std::string_view::npos) fail(coilInvalidUsage, "'[' inside a range");
    host += firstOfRange(range);
    i = close + 1;
  }
  if (host.empty()) fail(coilInvalidUsage, "an empty host name at the start");
  return host;
}

}  // namespace coil
