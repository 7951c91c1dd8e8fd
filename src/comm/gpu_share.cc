#include "comm/gpu_share.h"

#include <algorithm>
#include <cstring>

namespace coil {

RankGpu rankGpu(uint64_t hostHash, int32_t pid, const std::optional<std::array<uint8_t, 16>>& uuid) {
  RankGpu r{};
  r.hostHash = hostHash;
  r.pid = pid;
  if (uuid) {
    r.hasGpu = 1;
    std::memcpy(r.uuid, uuid->data(), sizeof r.uuid);
  }
  return r;
}

GpuShare gpuShare(const std::vector<RankGpu>& all, int rank) {
  GpuShare share;
  const RankGpu& me = all[static_cast<size_t>(rank)];
  if (!me.hasGpu) return share;
  std::vector<int32_t> pids{me.pid};
  for (size_t q = 0; q < all.size(); ++q) {
    const RankGpu& r = all[q];
    if (static_cast<int>(q) == rank || !r.hasGpu || r.hostHash != me.hostHash ||
        std::memcmp(r.uuid, me.uuid, sizeof me.uuid) != 0)
      continue;
    if (static_cast<int>(q) < rank) share.lowestRank = false;
    if (r.pid == me.pid) share.withThreads = true;
    else if (std::find(pids.begin(), pids.end(), r.pid) == pids.end()) pids.push_back(r.pid);
  }
  share.processes = static_cast<int>(pids.size());
  return share;
}

}  // namespace coil
