#include "topo/cpu_list.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace coil::topo {

std::string formatCpuList(const std::vector<unsigned>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::optional<std::vector<unsigned>> parseCpuList(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  std::vector<unsigned> cpus;
  const char* p = text.data() + begin;
  const char* const last = text.data() + end;
  // A range bigger than this is a typo, not a machine.
  constexpr unsigned kMaxCpu = 1u << 20;
  while (p < last) {
    unsigned lo = 0, hi = 0;
    auto r = std::from_chars(p, last, lo);
    if (r.ec != std::errc() || lo > kMaxCpu) return std::nullopt;
    p = r.ptr;
    hi = lo;
    if (p < last && *p == '-') {
      r = std::from_chars(p + 1, last, hi);
      if (r.ec != std::errc() || hi < lo || hi > kMaxCpu) return std::nullopt;
      p = r.ptr;
    }
    for (unsigned c = lo; c <= hi; ++c) cpus.push_back(c);
    if (p < last) {
      if (*p != ',' || p + 1 == last) return std::nullopt;
      ++p;
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace coil::topo
