#include "comm/gpu_share.h"

#include <algorithm>
#include <set>
#include <utility>

namespace coil {

GpuShare gpuShare(const std::vector<RankGpu>& all, int rank) {
  GpuShare share;
  const RankGpu& me = all[static_cast<size_t>(rank)];
  if (!me.uuid) return share;
  std::vector<int32_t> pids{me.pid};
  for (size_t q = 0; q < all.size(); ++q) {
    const RankGpu& r = all[q];
    if (static_cast<int>(q) == rank || r.hostHash != me.hostHash || r.uuid != me.uuid) continue;
    if (static_cast<int>(q) < rank) share.lowestRank = false;
    if (r.pid == me.pid) share.withThreads = true;
    else if (std::find(pids.begin(), pids.end(), r.pid) == pids.end()) pids.push_back(r.pid);
  }
  share.processes = static_cast<int>(pids.size());
  return share;
}

ProcessSpread processSpread(const std::vector<RankGpu>& all) {
  std::set<std::pair<uint64_t, int32_t>> processes;
  for (const RankGpu& r : all) processes.emplace(r.hostHash, r.pid);
  return {processes.size() > 1, processes.size() > 1 && processes.size() < all.size()};
}

bool allOnOneHostWithGpus(const std::vector<RankGpu>& all) {
  return std::all_of(all.begin(), all.end(), [&](const RankGpu& r) {
    return r.uuid && r.hostHash == all.front().hostHash;
  });
}

}  // namespace coil
