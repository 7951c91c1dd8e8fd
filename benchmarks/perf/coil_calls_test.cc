// -a over real communicators: three ranks as threads report the times
// 1, 2 and 6; the row gets rank 0's, the mean, the min or the max. And -m
// with -z: timeCoil's groups and barriers run on every rank and return a
// time per call.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "coil.h"
#include "coil_calls.h"

namespace coil_perf {
namespace {

// Runs `body(rank, comm)` on `n` ranks as threads of this process.
template <typename Body>
void onRanks(int n, Body body) {
  std::vector<coilComm_t> comms(n);
  ASSERT_EQ(coilCommInitAll(comms.data(), n, nullptr), coilSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { body(r, comms[r]); });
  for (auto& t : threads) t.join();
  for (coilComm_t c : comms) coilCommDestroy(c);
}

TEST(Average, CombinesTheRanksTimesAsNcclTestsDashA) {
  const double mine[3] = {2.0, 1.0, 6.0};
  double got[4][3] = {};
  onRanks(3, [&](int rank, coilComm_t comm) {
    for (Average how : {Average::Rank0, Average::Mean, Average::Min, Average::Max})
      got[static_cast<int>(how)][rank] = combineOverRanks(comm, mine[rank], how, rank, 3);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_DOUBLE_EQ(got[0][r], 2.0) << "rank 0's, on rank " << r;
    EXPECT_DOUBLE_EQ(got[1][r], 3.0) << "mean, on rank " << r;
    EXPECT_DOUBLE_EQ(got[2][r], 1.0) << "min, on rank " << r;
    EXPECT_DOUBLE_EQ(got[3][r], 6.0) << "max, on rank " << r;
  }
}

TEST(Timing, AggregatedAndBlockingIterationsCompleteOnEveryRank) {
  double seconds[3] = {};
  onRanks(3, [&](int rank, coilComm_t comm) {
    std::vector<float> send(64, 1.0f), recv(64, 0.0f);
    CollCall call;
    call.coll = Collective::AllReduce;
    call.send = send.data();
    call.recv = recv.data();
    call.count = send.size();
    call.type = typeInfo(coilFloat32);
    call.op = coilSum;
    const Timing t{1, 3, 4, 1, Average::Max};
    seconds[rank] = timeCoil(call, comm, rank, 3, t);
    EXPECT_EQ(recv[0], 3.0f) << "the grouped all-reduces ran on rank " << rank;
  });
  for (double s : seconds) {
    EXPECT_GT(s, 0.0);
    EXPECT_EQ(s, seconds[0]) << "-a 3: every rank reports the same max";
  }
}

}  // namespace
}  // namespace coil_perf
