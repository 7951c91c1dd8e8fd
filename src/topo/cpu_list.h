// CPU lists in the kernel's text form ("0-3,8,10-11"), as /sys writes them
// (cpulist files) and as people read them (taskset -c, numactl -C).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace coil::topo {

/// "0-3,8" for {0,1,2,3,8}; "" for none. Expects ascending, distinct values.
std::string formatCpuList(const std::vector<unsigned>& cpus);

/// The CPUs of "0-3,8" (whitespace around it ignored), ascending; nullopt
/// when the text is not such a list.
std::optional<std::vector<unsigned>> parseCpuList(const std::string& text);

}  // namespace coil::topo
