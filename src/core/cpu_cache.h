// The size of the last-level CPU cache, as sysfs reports it.
//
// Header-only so that coil_perf (a client of the public API) reads the same
// figure the cost model uses. sysconf(_SC_LEVEL3_CACHE_SIZE) reads CPUID,
// which a VM may fill with its host's figures; sysfs tells what the guest has.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string>

namespace coil {

/// The largest cache of CPU 0 ("32768K" in .../cache/indexN/size), or 0.
inline size_t lastLevelCacheBytes() {
  size_t best = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string file =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size";
    std::FILE* f = std::fopen(file.c_str(), "r");
    if (!f) break;
    unsigned long value = 0;
    char unit = 0;
    if (std::fscanf(f, "%lu%c", &value, &unit) >= 1)
      best = std::max<size_t>(best, value * (unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1));
    std::fclose(f);
  }
  return best;
}

}  // namespace coil
