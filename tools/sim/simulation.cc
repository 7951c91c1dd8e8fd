#include "simulation.h"

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>

#include "algorithms/fingerprint.h"
#include "result_colours.h"

namespace coil::sim {
namespace {

using algo::Blocks;
using algo::Layout;
using K = algo::PrimitiveKind;

bool reduces(K k) {
  return k == K::RecvReduceSend || k == K::RecvReduceCopySend || k == K::RecvReduceCopy ||
         k == K::RecvReduce;
}
bool readsInput(K k) { return k != K::Recv && k != K::RecvCopySend; }
bool writesOutput(K k) { return k != K::Send && k != K::RecvReduceSend; }

// The rank state the replay keeps: its buffers as contributor sets.
struct RankBuffers {
  std::vector<Contributors> input, output;
};

}  // namespace

std::string contributorsText(Contributors c, int n) {
  std::string s;
  for (int q = 0; q < n; ++q) s += (c >> q) & 1 ? static_cast<char>('0' + q % 10) : '.';
  return s;
}

Simulation simulate(const Request& req) {
  if (!req.algorithm) throw std::invalid_argument("no algorithm");
  const algo::AlgorithmProgram& a = *req.algorithm;
  const int n = req.nranks;
  if (n < 1 || n > 64) throw std::invalid_argument("ranks must be in [1, 64]");
  if (req.root < 0 || req.root >= n) throw std::invalid_argument("root must be a rank");
  if (!req.hostOf.empty() && static_cast<int>(req.hostOf.size()) != n)
    throw std::invalid_argument("hosts must name one host per rank");
  Simulation s;
  s.request = req;
  const size_t count = req.count;
  // Default: one round (an all-reduce cuts its buffer into n chunks itself).
  const bool cutsInN = req.collective == algo::CollKind::AllReduce ||
                       req.collective == algo::CollKind::Barrier;
  const size_t chunk = req.chunkElems       ? req.chunkElems
                       : cutsInN            ? count / static_cast<size_t>(n) + 1
                                            : std::max<size_t>(count, 1);
  s.request.chunkElems = chunk;
  s.inputElems = (a.input == Blocks::kOne ? 1 : n) * count;
  s.outputElems = (a.output == Blocks::kOne ? 1 : n) * count;
  const std::vector<int>* hostOf = req.hostOf.empty() ? nullptr : &req.hostOf;
  for (int r = 0; r < n; ++r) {
    algo::TraceExecutor t;
    a.program(t, algo::CallShape{r, n, count, chunk, req.root, hostOf});
    s.programs.push_back(t.steps());
  }

  // Buffers as the driver sets them up for the program's layout.
  const bool inPlace = a.layout != Layout::kSeparate;
  std::vector<RankBuffers> ranks(n);
  for (int r = 0; r < n; ++r) {
    ranks[r].input.assign(s.inputElems, Contributors{1} << r);
    ranks[r].output.assign(s.outputElems, 0);
    auto& out = ranks[r].output;
    switch (a.layout) {
      case Layout::kSeparate: break;
      case Layout::kInPlaceAtRoot:
        if (r != req.root) break;
        [[fallthrough]];
      case Layout::kInPlace:
      case Layout::kAccumulate: std::fill_n(out.begin(), count, Contributors{1} << r); break;
      case Layout::kInPlaceOwnBlock:
        std::fill_n(out.begin() + static_cast<ptrdiff_t>(r * count), count, Contributors{1} << r);
        break;
    }
  }
  auto origin = [&](int r) { return a.outputAtOwnBlock ? static_cast<size_t>(r) * count : 0; };
  auto read = [&](int r, size_t at, size_t len) {
    const auto& buf = inPlace ? ranks[r].output : ranks[r].input;
    if (at + len > buf.size())
      throw std::logic_error("rank " + std::to_string(r) + " reads outside its buffer");
    return std::vector<Contributors>(buf.begin() + static_cast<ptrdiff_t>(at),
                                     buf.begin() + static_cast<ptrdiff_t>(at + len));
  };

  std::map<std::pair<int, int>, std::deque<int>> links;  // message indexes in flight
  std::vector<size_t> pc(n, 0);
  std::vector<int> postedHalf(n, -1);  // sendRecv: the send half of the current step
  auto post = [&](int r, int to, int round, size_t offset, std::vector<Contributors> values,
                  bool exchange) {
    s.messages.push_back({r, to, round, -1, offset, values.size(), std::move(values), exchange});
    const int m = static_cast<int>(s.messages.size()) - 1;
    links[{r, to}].push_back(m);
    return m;
  };
  auto snapshot = [&] {
    std::vector<std::vector<Contributors>> o;
    for (const auto& rb : ranks) o.push_back(rb.output);
    s.outputs.push_back(std::move(o));
  };
  snapshot();
  for (int round = 0;; ++round) {
    bool unfinished = false;
    for (int r = 0; r < n; ++r) {
      if (pc[r] >= s.programs[r].size()) continue;
      unfinished = true;
      const algo::TraceStep& st = s.programs[r][pc[r]];
      if (st.kind == K::SendRecv && postedHalf[r] < 0 && st.count > 0)
        postedHalf[r] = post(r, st.to, round, st.inOffset, read(r, st.inOffset, st.count), true);
    }
    if (!unfinished) break;
    bool ran = false;
    for (int r = 0; r < n; ++r) {
      if (pc[r] >= s.programs[r].size()) continue;
      const algo::TraceStep& st = s.programs[r][pc[r]];
      int in = -1;
      if (st.from >= 0 && st.count > 0) {
        auto& q = links[{st.from, r}];
        if (q.empty()) continue;
        const Message& m = s.messages[q.front()];
        if (m.sentRound >= round && !m.exchange) continue;  // sent this round: next round
        if (m.count != st.count)
          throw std::logic_error("rank " + std::to_string(r) + " receives " +
                                 std::to_string(st.count) + " elements, rank " +
                                 std::to_string(st.from) + " sent " + std::to_string(m.count));
        in = q.front();
        q.pop_front();
        s.messages[in].receivedRound = round;
      }
      const size_t inOffset = st.inOffset != SIZE_MAX ? st.inOffset : st.offset;
      std::vector<Contributors> result =
          in >= 0 ? s.messages[in].values : std::vector<Contributors>(st.count, 0);
      if (readsInput(st.kind) && st.kind != K::SendRecv) {
        const std::vector<Contributors> mine = read(r, inOffset, st.count);
        for (size_t i = 0; i < st.count; ++i) result[i] = reduces(st.kind) ? result[i] | mine[i] : mine[i];
      }
      if (writesOutput(st.kind)) {
        for (size_t i = 0; i < st.count; ++i) {
          const size_t o = st.offset + i - origin(r);
          if (o >= s.outputElems)
            throw std::logic_error("rank " + std::to_string(r) + " writes outside its output");
          ranks[r].output[o] = result[i];
        }
      }
      Action act{r, pc[r], round, st, in, -1};
      if (st.kind == K::SendRecv) act.messageOut = postedHalf[r];
      else if (st.to >= 0 && st.count > 0) act.messageOut = post(r, st.to, round, st.offset, result, false);
      postedHalf[r] = -1;
      s.actions.push_back(act);
      ++pc[r];
      ran = true;
    }
    if (!ran) {
      s.deadlocked = true;
      break;
    }
    s.rounds = round + 1;
    snapshot();
  }

  for (int r = 0; r < n; ++r)
    for (size_t o = 0; o < s.outputElems; ++o) {
      const Contributors want = wantedContributors(s, r, o);
      if (want == 0) continue;  // unspecified there
      if (ranks[r].output[o] != want)
        s.wrong.push_back("rank " + std::to_string(r) + " element " + std::to_string(o) +
                          ": has " + contributorsText(ranks[r].output[o], n) + ", wants " +
                          contributorsText(want, n));
    }
  return s;
}

std::vector<RoundCost> roundCosts(const Simulation& s, const CostParams& p) {
  // A message costs α + bytes·β once, in the round it arrives (posting a
  // send is free: its time is the receiver's wait); reducing costs γ per
  // byte, a local copy β per byte.
  std::vector<RoundCost> costs(s.rounds);
  std::vector<double> worst(s.rounds, -1);
  const double esize = static_cast<double>(s.request.elementBytes);
  for (const Action& act : s.actions) {
    const double bytes = static_cast<double>(act.step.count) * esize;
    RoundCost c;
    if (act.messageIn >= 0) c.alphaUs = p.alphaUs;
    if (act.messageIn >= 0 || act.step.kind == K::Copy) c.betaUs = bytes * p.betaUsPerB;
    if (reduces(act.step.kind)) c.gammaUs = bytes * p.gammaUsPerB;
    if (c.total() > worst[act.round]) {
      worst[act.round] = c.total();
      costs[act.round] = c;
    }
  }
  return costs;
}

}  // namespace coil::sim
