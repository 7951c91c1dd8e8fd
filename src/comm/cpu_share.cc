#include "comm/cpu_share.h"

#include <sched.h>
#include <unistd.h>

#include <bit>

#include "comm/host_identity.h"

namespace coil {

RankCpus thisRankCpus() {
  RankCpus r{};
  r.hostHash = localHostHash();
  constexpr int kBits = static_cast<int>(sizeof r.mask * 8);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < kBits && c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) r.mask[c / 64] |= uint64_t{1} << (c % 64);
  } else {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    for (int c = 0; c < kBits && c < online; ++c) r.mask[c / 64] |= uint64_t{1} << (c % 64);
  }
  return r;
}

CpuShare cpuShare(const std::vector<RankCpus>& all, int rank) {
  CpuShare share{0, 0};
  uint64_t pooled[16] = {};
  for (const RankCpus& r : all) {
    if (r.hostHash != all[static_cast<size_t>(rank)].hostHash) continue;
    ++share.ranksHere;
    for (int w = 0; w < 16; ++w) pooled[w] |= r.mask[w];
  }
  for (uint64_t word : pooled) share.cpusHere += std::popcount(word);
  if (share.cpusHere == 0) share.cpusHere = 1;  // an unreadable mask everywhere
  return share;
}

}  // namespace coil
