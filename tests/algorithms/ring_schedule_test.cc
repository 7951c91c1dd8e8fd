// The ring's schedule, checked two ways without any transport:
//  1. the exact step list for a small case (what docs and coil-sim show);
//  2. a symbolic run of all ranks' traces: every element's value is the SET
//     of ranks whose input it contains; messages flow through per-link queues.
//     At the end every rank must hold {0..n-1} in every element, and every
//     send must have been matched by a receive of the same span.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

#include "algorithms/ring.h"
#include "algorithms/trace_executor.h"

namespace coil::algo {
namespace {

using K = PrimitiveKind;

std::vector<TraceStep> trace(int rank, int n, size_t count, size_t chunk) {
  TraceExecutor t;
  ringAllReduce(t, CallShape{rank, n, count, chunk});
  return t.steps();
}

TEST(RingSchedule, ThreeRanksSixElements) {
  // One round; chunk c = elements [2c, 2c+2).
  std::vector<TraceStep> want = {
      {K::Send, -1, 1, 0, 2},               // step 0: start chunk 0
      {K::RecvReduceSend, 2, 1, 4, 2},      // step 1: chunk 2 (= 0-1)
      {K::RecvReduceCopySend, 2, 1, 2, 2},  // step 2: chunk 1 complete
      {K::RecvCopySend, 2, 1, 0, 2},        // step 3: final chunk 0
      {K::Recv, 2, -1, 4, 2},               // step 4: final chunk 2
  };
  EXPECT_EQ(trace(0, 3, 6, 100), want);
  std::vector<TraceStep> rank2 = trace(2, 3, 6, 100);
  ASSERT_EQ(rank2.size(), 5u);
  EXPECT_EQ(rank2[0], (TraceStep{K::Send, -1, 0, 4, 2}));
  EXPECT_EQ(rank2[2], (TraceStep{K::RecvReduceCopySend, 1, 0, 0, 2}));
}

TEST(RingSchedule, SingleRankCopies) {
  std::vector<TraceStep> want = {{K::Copy, -1, -1, 0, 7}};
  EXPECT_EQ(trace(0, 1, 7, 4), want);
}

TEST(RingSchedule, RoundsRespectChunkSize) {
  for (int n : {2, 3, 5}) {
    for (size_t chunk : {1, 3, 8}) {
      for (const TraceStep& s : trace(1 % n, n, 101, chunk)) EXPECT_LE(s.count, chunk);
    }
  }
}

// Symbolic execution of all ranks at once.
using Contribution = std::set<int>;
struct Message {
  size_t offset;
  std::vector<Contribution> data;
};

void simulate(int n, size_t count, size_t chunk) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " count=" << count << " chunk=" << chunk);
  std::vector<std::vector<TraceStep>> programs;
  for (int r = 0; r < n; ++r) programs.push_back(trace(r, n, count, chunk));
  std::vector<std::vector<Contribution>> output(n, std::vector<Contribution>(count));
  std::map<std::pair<int, int>, std::deque<Message>> links;  // (from, to) -> queue
  std::vector<size_t> pc(n, 0);

  auto input = [&](int r, size_t off, size_t cnt) {
    std::vector<Contribution> v(cnt, Contribution{r});
    (void)off;
    return v;
  };
  // Round-robin: run each rank until it blocks on an empty queue.
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      while (pc[r] < programs[r].size()) {
        const TraceStep& s = programs[r][pc[r]];
        std::vector<Contribution> in;
        if (s.from >= 0 && s.count > 0) {
          auto& q = links[{s.from, r}];
          if (q.empty()) break;  // blocked
          ASSERT_EQ(q.front().offset, s.offset) << "rank " << r << " received the wrong span";
          ASSERT_EQ(q.front().data.size(), s.count);
          in = std::move(q.front().data);
          q.pop_front();
        }
        std::vector<Contribution> mine = input(r, s.offset, s.count);
        std::vector<Contribution> result;
        switch (s.kind) {
          case K::Send: result = mine; break;
          case K::Recv:
          case K::RecvCopySend: result = in; break;
          case K::RecvReduceSend:
          case K::RecvReduceCopySend:
          case K::RecvReduceCopy:
            result = in;
            for (size_t i = 0; i < in.size(); ++i) {
              ASSERT_EQ(result[i].count(r), 0u) << "rank " << r << " reduced its input twice";
              result[i].insert(r);
            }
            break;
          case K::Copy: result = mine; break;
        }
        bool writes = s.kind == K::Recv || s.kind == K::RecvCopySend ||
                      s.kind == K::RecvReduceCopySend || s.kind == K::RecvReduceCopy ||
                      s.kind == K::Copy;
        if (writes)
          for (size_t i = 0; i < s.count; ++i) output[r][s.offset + i] = result[i];
        if (s.to >= 0 && s.count > 0) links[{r, s.to}].push_back({s.offset, result});
        ++pc[r];
        progress = true;
      }
    }
  }
  Contribution all;
  for (int r = 0; r < n; ++r) all.insert(r);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(pc[r], programs[r].size()) << "rank " << r << " deadlocked";
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(output[r][i], all) << "rank " << r << " element " << i;
  }
  for (auto& [link, q] : links) EXPECT_TRUE(q.empty()) << "unreceived data on a link";
}

TEST(RingSchedule, SymbolicRunGivesEveryoneTheFullReduction) {
  for (int n = 1; n <= 8; ++n)
    for (size_t count : {0, 1, 2, 3, 5, 7, 13, 64, 97})
      for (size_t chunk : {1, 2, 5, 1000}) simulate(n, count, chunk);
}

}  // namespace
}  // namespace coil::algo
