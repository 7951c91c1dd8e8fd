// Which ranks share a GPU (src/comm/gpu_share.h): threads of one process
// on it (their calls run in host order), how many processes use it (init
// warns: the GPU time-slices between them), and who says so. No GPU needed:
// the UUIDs are made up, as CUDA_VISIBLE_DEVICES makes ordinals differ.
// And whether the ranks can map each other's device memory at all.
#include <gtest/gtest.h>

#include "comm/gpu_share.h"

namespace coil {
namespace {

std::array<uint8_t, 16> gpu(uint8_t id) {
  std::array<uint8_t, 16> uuid{};
  uuid.fill(0xA0);
  uuid[15] = id;
  return uuid;
}

RankGpu on(uint64_t host, int32_t pid, std::optional<std::array<uint8_t, 16>> uuid) {
  return {host, pid, uuid};
}

TEST(GpuShare, OneRankPerGpuSharesNothing) {
  const std::vector<RankGpu> all{on(1, 100, gpu(0)), on(1, 101, gpu(1)), on(2, 100, gpu(0))};
  for (int r = 0; r < 3; ++r) {
    const GpuShare s = gpuShare(all, r);
    EXPECT_FALSE(s.withThreads) << r;
    EXPECT_EQ(s.processes, 1) << r;  // rank 2's GPU has rank 0's UUID but another host
    EXPECT_TRUE(s.lowestRank) << r;
  }
}

TEST(GpuShare, ThreadsOfOneProcessOnOneGpu) {
  const std::vector<RankGpu> all{on(1, 100, gpu(0)), on(1, 100, gpu(0)), on(1, 100, gpu(1))};
  EXPECT_TRUE(gpuShare(all, 0).withThreads);
  EXPECT_TRUE(gpuShare(all, 1).withThreads);
  EXPECT_FALSE(gpuShare(all, 2).withThreads);
  EXPECT_EQ(gpuShare(all, 0).processes, 1);
  EXPECT_TRUE(gpuShare(all, 0).lowestRank);
  EXPECT_FALSE(gpuShare(all, 1).lowestRank);
}

TEST(GpuShare, ProcessesOnOneGpuAreCountedOnce) {
  // Ranks 0, 1 threads of pid 100; rank 2 pid 101; rank 3 pid 102 on
  // another GPU; rank 4 pid 103 on the first GPU again.
  const std::vector<RankGpu> all{on(1, 100, gpu(7)), on(1, 100, gpu(7)), on(1, 101, gpu(7)),
                                 on(1, 102, gpu(8)), on(1, 103, gpu(7))};
  EXPECT_EQ(gpuShare(all, 0).processes, 3);
  EXPECT_EQ(gpuShare(all, 2).processes, 3);
  EXPECT_EQ(gpuShare(all, 4).processes, 3);
  EXPECT_EQ(gpuShare(all, 3).processes, 1);
  EXPECT_FALSE(gpuShare(all, 2).withThreads);
  EXPECT_TRUE(gpuShare(all, 1).withThreads);
  EXPECT_TRUE(gpuShare(all, 0).lowestRank);
  EXPECT_FALSE(gpuShare(all, 2).lowestRank);
  EXPECT_TRUE(gpuShare(all, 3).lowestRank);
}

TEST(GpuShare, RanksWithoutAGpuShareNothing) {
  const std::vector<RankGpu> all{on(1, 100, std::nullopt), on(1, 100, std::nullopt),
                                 on(1, 101, gpu(0)), on(1, 102, std::nullopt)};
  EXPECT_FALSE(gpuShare(all, 0).withThreads);
  EXPECT_EQ(gpuShare(all, 0).processes, 1);
  EXPECT_EQ(gpuShare(all, 2).processes, 1);
  EXPECT_TRUE(gpuShare(all, 2).lowestRank);
}

// Peer windows (api/peer_windows.h) need every rank on one host with a GPU:
// any GPU, shared or not; one rank without one, or on another host, is enough
// to rule them out, on every rank alike.
TEST(GpuShare, PeerWindowsNeedEveryRankOnOneHostWithAGpu) {
  EXPECT_TRUE(allOnOneHostWithGpus({on(1, 100, gpu(0)), on(1, 101, gpu(0))}));
  EXPECT_TRUE(allOnOneHostWithGpus({on(1, 100, gpu(0)), on(1, 100, gpu(1)), on(1, 102, gpu(0))}));
  EXPECT_TRUE(allOnOneHostWithGpus({on(7, 100, gpu(3))}));
  EXPECT_FALSE(allOnOneHostWithGpus({on(1, 100, gpu(0)), on(1, 101, std::nullopt)}));
  EXPECT_FALSE(allOnOneHostWithGpus({on(1, 100, std::nullopt), on(1, 101, gpu(0))}));
  EXPECT_FALSE(allOnOneHostWithGpus({on(1, 100, gpu(0)), on(2, 100, gpu(0))}));
}

// How the ranks spread over processes (a process is a host and a pid, GPU
// or not): what destroy under legacy IPC waits for (api/shared_teardown.h).
TEST(GpuShare, ProcessSpreadTellsSeveralProcessesAndThreadsAmongThem) {
  const auto spread = [](const std::vector<RankGpu>& all) {
    const ProcessSpread s = processSpread(all);
    return std::pair(s.severalProcesses, s.threadsAmongProcesses);
  };
  EXPECT_EQ(spread({on(1, 100, gpu(0))}), std::pair(false, false));
  EXPECT_EQ(spread({on(1, 100, gpu(0)), on(1, 100, gpu(1))}), std::pair(false, false));
  EXPECT_EQ(spread({on(1, 100, gpu(0)), on(1, 101, gpu(0))}), std::pair(true, false));
  // The same pid on two hosts is two processes.
  EXPECT_EQ(spread({on(1, 100, gpu(0)), on(2, 100, gpu(0))}), std::pair(true, false));
  EXPECT_EQ(spread({on(1, 100, gpu(0)), on(1, 100, gpu(1)), on(1, 101, std::nullopt)}),
            std::pair(true, true));
}

}  // namespace
}  // namespace coil
