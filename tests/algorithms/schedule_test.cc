// Every algorithm's schedule, checked without any transport:
//  1. the exact step list for small cases (what docs and coil-sim show);
//  2. a symbolic run of all ranks' traces at once: every element's value is
//     the SET of (rank, input index) pairs it contains; messages flow through
//     per-link queues of bounded depth (a full queue blocks the sender, as a
//     full FIFO does). At the end every output element must hold exactly the
//     contributions the collective's definition says, nothing may be left
//     unreceived, and no rank may be stuck (a deadlock).
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>

#include "algorithms/collectives.h"
#include "algorithms/fifo_oneshot_trace.h"
#include "algorithms/registry.h"
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
  std::vector<TraceStep> want = {{K::Copy, -1, -1, 0, 7, 0}};
  EXPECT_EQ(trace(0, 1, 7, 4), want);
}

TEST(RingSchedule, RoundsRespectChunkSize) {
  for (int n : {2, 3, 5}) {
    for (size_t chunk : {1, 3, 8}) {
      for (const TraceStep& s : trace(1 % n, n, 101, chunk)) EXPECT_LE(s.count, chunk);
    }
  }
}

using Elem = std::set<std::pair<int, size_t>>;  // (rank, input index) contributions

// Symbolic execution of all ranks at once.
struct Message {
  size_t offset;
  std::vector<Elem> data;
};

// ---- symbolic simulation of every collective --------------------------------

// The definition each output element must meet, as a set.
Elem expected(const AlgorithmProgram& a, int r, int n, size_t count, int root, size_t o) {
  Elem e;
  for (const auto& c : expectedContributions(a.collective, r, n, count, root, o)) e.insert(c);
  return e;
}

// Replays every rank's trace (`programs`, one per rank) of an entry with
// c's buffers. The FIFO one-shot's own steps: recvBlock only starts a
// receive; waitAll takes every started one at once, blocked until each
// is on its link; reduceBlocks reduces the blocks and the rank's input.
void replay(const AlgorithmProgram& c, const std::vector<std::vector<TraceStep>>& programs, int n,
            size_t count, int root, size_t depth) {
  const bool inPlace = c.layout != Layout::kSeparate;
  const size_t inLen = (c.input == Blocks::kOne ? 1 : n) * count;
  const size_t outLen = (c.output == Blocks::kOne ? 1 : n) * count;
  std::vector<std::vector<Elem>> input(n), output(n, std::vector<Elem>(outLen));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < inLen; ++i) input[r].push_back(Elem{{r, i}});
  const bool isAllGather = c.layout == Layout::kInPlaceOwnBlock;
  const bool scratch = c.layout == Layout::kScratch;  // in place on all n input blocks
  for (int r = 0; r < n; ++r) {
    if (!inPlace) continue;  // driver: own data into output first
    if (scratch) {
      output[r] = input[r];
      continue;
    }
    const bool rooted = c.layout == Layout::kInPlaceAtRoot;
    for (size_t i = 0; i < count; ++i) {
      if (isAllGather) output[r][r * count + i] = input[r][i];
      else if (!rooted || r == root) output[r][i] = input[r][i];
    }
  }
  auto origin = [&](int r) { return c.outputAtOwnBlock ? static_cast<size_t>(r) * count : 0; };
  auto readIn = [&](int r, size_t i) -> Elem& {
    return inPlace ? output[r][i] : input[r][i];
  };

  std::map<std::pair<int, int>, std::deque<Message>> links;
  std::vector<size_t> pc(n, 0);
  std::vector<bool> halfSent(n, false);  // sendRecv: send part done
  std::vector<std::vector<int>> awaited(n);                 // FIFO one-shot: receives started
  std::vector<std::map<int, std::vector<Elem>>> blocks(n);  // FIFO one-shot: arrived inputs
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      while (pc[r] < programs[r].size()) {
        const TraceStep& s = programs[r][pc[r]];
        if (isFifoOneShotKind(s.kind)) {
          if (s.kind == K::RecvBlock) {
            awaited[r].push_back(s.from);
          } else if (s.kind == K::WaitAll) {
            if (s.count > 0) {  // a call of 0 elements moves nothing
              if (std::any_of(awaited[r].begin(), awaited[r].end(),
                              [&](int q) { return links[{q, r}].empty(); }))
                break;  // blocked: an input has not been sent yet
              for (int q : awaited[r]) {
                auto& link = links[{q, r}];
                ASSERT_EQ(link.front().data.size(), s.count);
                ASSERT_EQ(blocks[r].count(q), 0u) << "rank " << r << " took two blocks from " << q;
                blocks[r][q] = std::move(link.front().data);
                link.pop_front();
              }
            }
            awaited[r].clear();
          } else {  // ReduceBlocks
            for (size_t i = 0; i < s.count; ++i) {
              ASSERT_LT(s.offset + i, outLen) << "rank " << r << " wrote outside its output";
              Elem sum = readIn(r, s.offset + i);
              for (const auto& [q, block] : blocks[r])
                for (const auto& x : block[i]) {
                  ASSERT_EQ(sum.count(x), 0u) << "rank " << r << " reduced a contribution twice";
                  sum.insert(x);
                }
              output[r][s.offset + i] = sum;
            }
          }
          ++pc[r];
          progress = true;
          continue;
        }
        const size_t inOff = s.inOffset != SIZE_MAX ? s.inOffset : s.offset;
        const bool readsInput = s.kind == K::Send || s.kind == K::Copy || s.kind == K::SendRecv ||
                                s.kind == K::RecvReduceSend || s.kind == K::RecvReduceCopySend ||
                                s.kind == K::RecvReduceCopy || s.kind == K::RecvReduce;
        std::vector<Elem> mine;
        for (size_t i = 0; readsInput && i < s.count; ++i) {
          size_t at = inOff + i;
          ASSERT_LT(at, inPlace ? outLen : inLen) << "rank " << r << " read outside its input";
          mine.push_back(readIn(r, at));
        }
        if (s.kind == K::SendRecv && !halfSent[r]) {
          auto& q = links[{r, s.to}];
          if (q.size() >= depth) break;
          q.push_back({s.inOffset, mine});
          halfSent[r] = true;
          progress = true;
        }
        std::vector<Elem> in;
        if (s.from >= 0 && s.count > 0) {
          auto& q = links[{s.from, r}];
          if (q.empty()) break;  // blocked on receive
          // Offsets may differ between the ends (gather, scatter): what a
          // message carries is checked through its contributions at the end.
          ASSERT_EQ(q.front().data.size(), s.count);
        }
        if (s.to >= 0 && s.count > 0 && s.kind != K::SendRecv && links[{r, s.to}].size() >= depth)
          break;  // blocked: the link is full
        if (s.from >= 0 && s.count > 0) {
          in = std::move(links[{s.from, r}].front().data);
          links[{s.from, r}].pop_front();
        }
        std::vector<Elem> result;
        switch (s.kind) {
          case K::Send: case K::Copy: result = mine; break;
          case K::Recv: case K::RecvCopySend: case K::SendRecv: result = in; break;
          case K::RecvReduceSend: case K::RecvReduceCopySend:
          case K::RecvReduceCopy: case K::RecvReduce:
            result = in;
            for (size_t i = 0; i < s.count; ++i) {
              for (const auto& x : mine[i])
                ASSERT_EQ(result[i].count(x), 0u) << "rank " << r << " reduced a contribution twice";
              result[i].insert(mine[i].begin(), mine[i].end());
            }
            break;
          default: FAIL() << "a window primitive in a FIFO program"; break;
        }
        const bool writes = s.kind != K::Send && s.kind != K::RecvReduceSend;
        if (writes)
          for (size_t i = 0; i < s.count; ++i) {
            size_t o = s.offset + i - origin(r);
            ASSERT_LT(o, outLen) << "rank " << r << " wrote outside its output";
            output[r][o] = result[i];
          }
        if (s.to >= 0 && s.count > 0 && s.kind != K::SendRecv)
          links[{r, s.to}].push_back({s.offset, result});
        halfSent[r] = false;
        ++pc[r];
        progress = true;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(pc[r], programs[r].size()) << "rank " << r << " is stuck (deadlock)";
    for (size_t o = 0; o < outLen; ++o) {
      // A scratch layout's result is this rank's block of it; the rest is scratch.
      const bool mine = o >= static_cast<size_t>(r) * count && o < static_cast<size_t>(r + 1) * count;
      if (scratch && !mine) continue;
      Elem want = expected(c, r, n, count, root, scratch ? o - static_cast<size_t>(r) * count : o);
      if (want.empty()) continue;  // this rank's output is unspecified there
      ASSERT_EQ(output[r][o], want) << "rank " << r << " output element " << o;
    }
  }
  for (auto& [link, q] : links) EXPECT_TRUE(q.empty()) << "unreceived data on a link";
}

void simulate(const AlgorithmProgram& c, int n, size_t count, size_t chunk, int root, size_t depth = 2,
              const std::vector<int>* hostOf = nullptr) {
  std::string layout;
  for (int r = 0; hostOf && r < n; ++r) layout += std::to_string((*hostOf)[r]);
  SCOPED_TRACE(::testing::Message() << c.function << " n=" << n << " count=" << count
                                    << " chunk=" << chunk << " root=" << root << " depth=" << depth
                                    << (hostOf ? " hosts=" + layout : std::string()));
  std::vector<std::vector<TraceStep>> programs;
  for (int r = 0; r < n; ++r) {
    TraceExecutor t;
    c.program(t, CallShape{r, n, count, chunk, root, hostOf});
    programs.push_back(t.steps());
  }
  replay(c, programs, n, count, root, depth);
}

// The FIFO one-shot's trace, rank by rank.
std::vector<TraceStep> traceFifoForm(const AlgorithmProgram& c, int rank, int n, size_t count) {
  const FifoOneShotShape shape{rank, n, count};
  FifoOneShotTrace t(shape);
  c.withoutWindow.program(t, shape);
  return t.steps();
}

// An entry's form over FIFOs (what runs where the ranks share no window).
void simulateFifoForm(const AlgorithmProgram& c, int n, size_t count, size_t depth) {
  SCOPED_TRACE(::testing::Message() << c.withoutWindow.function << " n=" << n << " count=" << count
                                    << " depth=" << depth);
  std::vector<std::vector<TraceStep>> programs;
  for (int r = 0; r < n; ++r) programs.push_back(traceFifoForm(c, r, n, count));
  replay(c, programs, n, count, 0, depth);
}

// Every registered program: a new algorithm is checked without a new test.
class Schedule : public ::testing::TestWithParam<AlgorithmProgram> {};

TEST_P(Schedule, EveryRankGetsExactlyTheDefinedContributions) {
  const AlgorithmProgram& c = GetParam();
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 11})
    for (size_t count : {1, 2, 3, 5, 7, 13, 64})
      for (size_t chunk : {1, 2, 5, 1000})
        for (int root : {0, n - 1, n / 2}) simulate(c, n, count, chunk, root);
}

// The FIFO programs; the replay of the window programs and of the rooted
// one-shot is coil-sim's (tests/tools/sim_test.cc), which knows shared
// slots and the exchange.
std::vector<AlgorithmProgram> fifoPrograms() {
  std::vector<AlgorithmProgram> fifo;
  for (const AlgorithmProgram& a : algorithmPrograms())
    if (a.program) fifo.push_back(a);
  return fifo;
}

INSTANTIATE_TEST_SUITE_P(Registry, Schedule, ::testing::ValuesIn(fifoPrograms()),
                         [](const ::testing::TestParamInfo<AlgorithmProgram>& i) {
                           return std::string(collName(i.param.collective)) + "_" + i.param.name;
                         });

// Every registered form over FIFOs (the FIFO one-shot): deadlock-free with
// FIFOs of depth 1 and 2, and every rank gets exactly every input once.
std::vector<AlgorithmProgram> fifoForms() {
  std::vector<AlgorithmProgram> forms;
  for (const AlgorithmProgram& a : algorithmPrograms())
    if (a.hasFifoForm()) forms.push_back(a);
  return forms;
}

TEST(FifoFormSchedule, EveryRankGetsExactlyTheDefinedContributions) {
  ASSERT_FALSE(fifoForms().empty()) << "the one-shot's FIFO form is registered";
  for (const AlgorithmProgram& c : fifoForms())
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 11})
      for (size_t count : {1, 2, 3, 5, 7, 13, 64})
        for (size_t depth : {1, 2}) simulateFifoForm(c, n, count, depth);
}

TEST(FifoFormSchedule, EachPeerFromTheRightNeighbourOnThenOneWaitAndTheReduction) {
  const AlgorithmProgram* oneShot = findProgram(CollKind::AllReduce, "oneshot");
  ASSERT_NE(oneShot, nullptr);
  ASSERT_TRUE(oneShot->hasFifoForm());
  const std::vector<TraceStep> want = {
      {K::RecvBlock, 2, -1, 0, 4}, {K::Send, -1, 2, 0, 4}, {K::RecvBlock, 0, -1, 0, 4},
      {K::Send, -1, 0, 0, 4},      {K::WaitAll, -1, -1, 0, 4}, {K::ReduceBlocks, -1, -1, 0, 4},
  };
  EXPECT_EQ(traceFifoForm(*oneShot, 1, 3, 4), want);
  // One rank: nothing to exchange; the reduction of one block copies it.
  EXPECT_EQ(traceFifoForm(*oneShot, 0, 1, 4),
            (std::vector<TraceStep>{{K::WaitAll, -1, -1, 0, 4}, {K::ReduceBlocks, -1, -1, 0, 4}}));
}

// The reference itself, on cases worked by hand.
TEST(ExpectedContributions, MatchTheDefinitions) {
  using V = std::vector<std::pair<int, size_t>>;
  EXPECT_EQ(expectedContributions(CollKind::AllReduce, 1, 3, 4, 0, 2), (V{{0, 2}, {1, 2}, {2, 2}}));
  EXPECT_EQ(expectedContributions(CollKind::Broadcast, 1, 3, 4, 2, 3), (V{{2, 3}}));
  EXPECT_EQ(expectedContributions(CollKind::Reduce, 1, 3, 4, 0, 2), V{});
  EXPECT_EQ(expectedContributions(CollKind::Reduce, 0, 2, 4, 0, 2), (V{{0, 2}, {1, 2}}));
  EXPECT_EQ(expectedContributions(CollKind::AllGather, 0, 3, 4, 0, 9), (V{{2, 1}}));
  EXPECT_EQ(expectedContributions(CollKind::ReduceScatter, 2, 3, 4, 0, 1),
            (V{{0, 9}, {1, 9}, {2, 9}}));
  EXPECT_EQ(expectedContributions(CollKind::AllToAll, 1, 3, 4, 0, 9), (V{{2, 5}}));
  EXPECT_EQ(expectedContributions(CollKind::Gather, 0, 3, 4, 0, 5), (V{{1, 1}}));
  EXPECT_EQ(expectedContributions(CollKind::Gather, 1, 3, 4, 0, 5), V{});
  EXPECT_EQ(expectedContributions(CollKind::Scatter, 2, 3, 4, 1, 3), (V{{1, 11}}));
}

TEST(Registry, EveryEntryIsFoundByItsNames) {
  for (const AlgorithmProgram& a : algorithmPrograms()) {
    EXPECT_EQ(findProgram(a.collective, a.name), &a);
    CollKind k;
    ASSERT_TRUE(parseCollective(collName(a.collective), &k));
    EXPECT_EQ(k, a.collective);
  }
  EXPECT_EQ(findProgram(CollKind::Barrier, "ring"), findProgram(CollKind::AllReduce, "ring"));
  EXPECT_EQ(findProgram(CollKind::AllGather, "tree"), nullptr);
}

// The hierarchical programs (every registered "hier") over host layouts:
// even, uneven (a host short of ranks, a host of one), hosts of one rank
// each, ranks of a host not contiguous, one host, and n = 11; every count
// and chunk as above.
std::vector<const AlgorithmProgram*> hierarchicalPrograms() {
  std::vector<const AlgorithmProgram*> hier;
  for (const AlgorithmProgram& a : algorithmPrograms())
    if (std::string(a.name) == "hier") hier.push_back(&a);
  return hier;
}

TEST(HierarchicalSchedule, EveryLayoutGivesEveryRankItsResult) {
  const std::vector<std::vector<int>> layouts = {
      {0, 0, 1, 1},          {0, 0, 1, 1, 2, 2},    {0, 0, 0, 1, 1, 1}, {0, 0, 1, 1, 1},
      {0, 0, 0, 1},          {0, 1, 2},             {0, 1, 0, 1},       {0, 0, 0, 0},
      {0, 1, 1, 2, 2, 2, 0}, {0, 0, 0, 0, 1},       {0},                {0, 1},
      {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3}};
  ASSERT_GE(hierarchicalPrograms().size(), 5u);
  for (const AlgorithmProgram* hier : hierarchicalPrograms())
    for (const auto& hosts : layouts) {
      const int n = static_cast<int>(hosts.size());
      // The rooted ones (broadcast, reduce) from every root.
      for (int root = 0; root < (hasRoot(hier->collective) ? n : 1); ++root)
        for (size_t count : {1, 2, 3, 5, 7, 13, 64})
          for (size_t chunk : {1, 2, 5, 1000}) simulate(*hier, n, count, chunk, root, 2, &hosts);
    }
}

// With ranks dealt to hosts in turn, the flat chain crosses hosts at every
// hop and the hierarchical one H - 1 times, whatever the root.
TEST(HierarchicalSchedule, RootedChainsCrossHostsOncePerHost) {
  const std::vector<int> cyclic = {0, 1, 2, 0, 1, 2, 0, 1};  // 3 hosts
  for (CollKind k : {CollKind::Broadcast, CollKind::Reduce})
    for (int root = 0; root < 8; ++root) {
      auto crossings = [&](const AlgorithmProgram& a) {
        int sends = 0;
        for (int r = 0; r < 8; ++r) {
          TraceExecutor t;
          a.program(t, CallShape{r, 8, 4, 4, root, &cyclic});
          for (const TraceStep& st : t.steps())
            if (st.to >= 0 && cyclic[st.to] != cyclic[r]) ++sends;
        }
        return sends;
      };
      EXPECT_EQ(crossings(*findProgram(k, "hier")), 2) << collName(k) << " root " << root;
      EXPECT_EQ(crossings(*findProgram(k, k == CollKind::Broadcast ? "ring" : "chain")), 7)
          << collName(k) << " root " << root;
    }
}

TEST(HierarchicalSchedule, WithoutHostsItIsOneHost) {
  for (const AlgorithmProgram* hier : hierarchicalPrograms())
    for (int n = 1; n <= 8; ++n)
      for (size_t count : {1, 7, 64}) simulate(*hier, n, count, 5, 0);
}

TEST(Schedule, CountZeroMovesNothing) {
  for (const AlgorithmProgram& c : fifoPrograms())
    for (int n : {1, 3}) {
      TraceExecutor t;
      c.program(t, CallShape{0, n, 0, 4, 0});
      for (const TraceStep& s : t.steps()) EXPECT_EQ(s.count, 0u) << c.function;
    }
  for (const AlgorithmProgram& c : fifoForms())
    for (int n : {1, 3}) {
      for (const TraceStep& s : traceFifoForm(c, 0, n, 0))
        EXPECT_EQ(s.count, 0u) << c.withoutWindow.function;
      simulateFifoForm(c, n, 0, 1);
    }
}

}  // namespace
}  // namespace coil::algo
