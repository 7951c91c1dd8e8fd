#include "simulation.h"

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>

#include "algorithms/fingerprint.h"
#include "algorithms/rooted_oneshot_trace.h"
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

// The rank state the replay keeps: its buffers as contributor sets; for
// window programs its two slots and when it posted each step; for the FIFO
// one-shot the blocks its peers' inputs land in.
struct RankBuffers {
  std::vector<Contributors> input, output;
  std::vector<Contributors> slots[2];
  std::map<uint32_t, int> postRound;  // step -> the round it was posted in
  int slotPostRound[2] = {-1, -1};    // the round each slot was last published
  std::map<int, std::vector<Contributors>> blocks;  // rank q -> block q, once arrived
  std::vector<int> awaited;                         // receives started, not yet waited for
  std::vector<Contributors> exchange;               // the rooted one-shot's payload
};

// Bytes a slot's inline lines carry (transports/window.h, Window::kInlineBytes).
constexpr size_t kWindowInlineBytes = 1908;

}  // namespace

bool spansHosts(const std::vector<int>& hostOf) {
  return std::any_of(hostOf.begin(), hostOf.end(), [&](int h) { return h != hostOf.front(); });
}

Form formFor(const Request& req) {
  const algo::AlgorithmProgram& a = *req.algorithm;
  if (a.isRootedOneShot()) return Form::kExchange;
  if (!a.onWindow()) return Form::kPrimitives;
  if (!spansHosts(req.hostOf)) return Form::kWindow;
  if (a.hasFifoForm()) return Form::kFifo;
  throw std::invalid_argument(std::string(a.name) +
                              " needs a shared window: every rank on one host");
}

const char* Simulation::function() const {
  return form == Form::kFifo ? request.algorithm->withoutWindow.function
                             : request.algorithm->function;
}

const char* Simulation::summary() const {
  return form == Form::kFifo ? request.algorithm->withoutWindow.summary
                             : request.algorithm->summary;
}

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
  s.inputElems = (a.input == Blocks::kOne ? 1 : n) * count;
  s.outputElems = (a.output == Blocks::kOne ? 1 : n) * count;
  const std::vector<int>* hostOf = req.hostOf.empty() ? nullptr : &req.hostOf;
  s.form = formFor(req);
  if (s.form == Form::kFifo) {
    // One message per peer: the whole input.
    s.request.chunkElems = count;
    for (int r = 0; r < n; ++r) {
      const algo::FifoOneShotShape shape{r, n, count};
      algo::FifoOneShotTrace t(shape);
      a.withoutWindow.program(t, shape);
      s.programs.push_back(t.steps());
    }
  } else if (s.form == Form::kExchange) {
    // One message per peer: the whole exchange.
    s.request.chunkElems = algo::rootedPayloadElems(req.collective, n, count);
    for (int r = 0; r < n; ++r) {
      const algo::RootedOneShotShape shape{req.collective, r, n, count, req.root};
      algo::RootedOneShotTrace t(shape);
      a.rootedOneShot(t, shape);
      s.programs.push_back(t.steps());
    }
  } else if (s.form == Form::kWindow) {
    // A window program's chunk is its piece: whole slices for n ranks (one
    // piece by default; a peer program's piece is of one block, whole
    // elements). Slices start on whole elements here, where the library
    // starts them on 64-byte lines (256 bytes on a device).
    const size_t unit =
        a.deviceOnly == algo::DeviceOnly::kPeerWindows ? 1 : static_cast<size_t>(n);
    const size_t piece = req.chunkElems ? req.chunkElems : std::max<size_t>(count, 1);
    s.request.chunkElems = (piece + unit - 1) / unit * unit;
    for (int r = 0; r < n; ++r) {
      algo::WindowTrace t;
      a.windowProgram(t, algo::WindowShape{r, n, count, 1, s.request.chunkElems,
                                           count * req.elementBytes <= kWindowInlineBytes,
                                           req.root});
      s.programs.push_back(t.steps());
    }
  } else {
    s.request.chunkElems = chunk;
    for (int r = 0; r < n; ++r) {
      algo::TraceExecutor t;
      a.program(t, algo::CallShape{r, n, count, chunk, req.root, hostOf});
      s.programs.push_back(t.steps());
    }
  }

  // Buffers as the driver sets them up for the program's layout.
  const bool inPlace = a.layout != Layout::kSeparate;
  std::vector<RankBuffers> ranks(n);
  for (int r = 0; r < n; ++r) {
    ranks[r].input.assign(s.inputElems, Contributors{1} << r);
    ranks[r].output.assign(s.outputElems, 0);
    // The peer programs that hand each rank its block put n pieces side by
    // side in a slot.
    const size_t slotElems = std::max(count, s.request.chunkElems) *
                             (a.deviceOnly == algo::DeviceOnly::kPeerWindows ? n : 1);
    for (auto& slot : ranks[r].slots) slot.assign(slotElems, 0);
    if (s.form == Form::kExchange) ranks[r].exchange.assign(s.request.chunkElems, 0);
    auto& out = ranks[r].output;
    switch (a.layout) {
      case Layout::kSeparate: break;
      case Layout::kInPlaceAtRoot:
        if (r != req.root) break;
        [[fallthrough]];
      case Layout::kInPlace:
      case Layout::kAccumulate: std::fill_n(out.begin(), count, Contributors{1} << r); break;
      case Layout::kScratch: out = ranks[r].input; break;  // all n blocks, reduced in place
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
  // One window primitive of rank r in `round`; false while it must wait.
  // Reading a peer's slot is drawn as a message from the round the peer
  // published it; *firstRead is the first such message (-1: none).
  auto runWindowStep = [&](int r, int round, const algo::TraceStep& st, int* firstRead) {
    RankBuffers& me = ranks[r];
    // A program on device windows reads the peers' buffers themselves:
    // slot 0 is rank q's input, slot 1 its output.
    auto slotOf = [&](int q, int slot) -> const std::vector<Contributors>& {
      if (!a.readsCallerBuffers()) return ranks[q].slots[slot];
      return slot == 0 && !inPlace ? ranks[q].input : ranks[q].output;
    };
    auto readSlot = [&](int q, int slot, size_t at) {
      const std::vector<Contributors>& from = slotOf(q, slot);
      if (at + st.count > from.size())
        throw std::logic_error("rank " + std::to_string(r) + " reads outside a slot");
      std::vector<Contributors> v(from.begin() + static_cast<ptrdiff_t>(at),
                                  from.begin() + static_cast<ptrdiff_t>(at + st.count));
      if (q != r) {
        s.messages.push_back({q, r, ranks[q].slotPostRound[slot], round, at, st.count, v, false});
        if (*firstRead < 0) *firstRead = static_cast<int>(s.messages.size()) - 1;
      }
      return v;
    };
    auto write = [&](std::vector<Contributors>& buf, size_t at, const std::vector<Contributors>& v) {
      if (at + v.size() > buf.size())
        throw std::logic_error("rank " + std::to_string(r) + " writes outside a buffer");
      std::copy(v.begin(), v.end(), buf.begin() + static_cast<ptrdiff_t>(at));
    };
    // x0 ⊕ … ⊕ x(n-1) of slot `slot` at `at`; this rank's term from
    // input [ownAt, …) unless ownFromSlot.
    auto reduceAll = [&](int slot, size_t at, bool ownFromSlot, size_t ownAt) {
      std::vector<Contributors> sum(st.count, 0);
      for (int q = 0; q < n; ++q) {
        const std::vector<Contributors> x =
            q == r && !ownFromSlot ? read(r, ownAt, st.count) : readSlot(q, slot, at);
        for (size_t i = 0; i < st.count; ++i) sum[i] |= x[i];
      }
      return sum;
    };
    switch (st.kind) {
      case K::Put: write(me.slots[st.slot], st.offset, read(r, st.inOffset, st.count)); break;
      case K::Post:
        me.postRound[st.step] = round;
        me.slotPostRound[st.slot] = round;
        break;
      case K::Wait:
        for (int q = 0; q < n; ++q) {
          auto it = ranks[q].postRound.find(st.step);
          if (it == ranks[q].postRound.end() || it->second >= round) return false;
        }
        break;
      case K::ReduceToOutput:
        write(me.output, st.offset, reduceAll(st.slot, st.inOffset, st.ownFromSlot, st.offset));
        break;
      case K::ReduceToSlot:
        write(me.slots[st.toSlot], st.offset, reduceAll(st.slot, st.offset, false, st.inOffset));
        break;
      case K::CopyOut: write(me.output, st.offset, readSlot(st.from, st.slot, st.inOffset)); break;
      default: throw std::logic_error("not a window primitive");
    }
    return true;
  };

  // One step of the FIFO one-shot's own vocabulary (its sends are FIFO
  // sends); false while it must wait. waitAll takes every awaited block in
  // one round, once all of them were sent in earlier rounds; *firstIn is
  // the first of those messages (-1: none).
  auto runFifoOneShotStep = [&](int r, int round, const algo::TraceStep& st, int* firstIn) {
    RankBuffers& me = ranks[r];
    switch (st.kind) {
      case K::RecvBlock: me.awaited.push_back(st.from); break;
      case K::WaitAll:
        if (st.count > 0) {  // a call of 0 elements moves nothing
          for (int q : me.awaited) {
            const auto& link = links[{q, r}];
            if (link.empty() || s.messages[link.front()].sentRound >= round) return false;
          }
          for (int q : me.awaited) {
            auto& link = links[{q, r}];
            const int m = link.front();
            link.pop_front();
            if (s.messages[m].count != st.count)
              throw std::logic_error("rank " + std::to_string(r) + " awaits " +
                                     std::to_string(st.count) + " elements, rank " +
                                     std::to_string(q) + " sent " +
                                     std::to_string(s.messages[m].count));
            s.messages[m].receivedRound = round;
            me.blocks[q] = s.messages[m].values;
            if (*firstIn < 0) *firstIn = m;
          }
        }
        me.awaited.clear();
        break;
      case K::ReduceBlocks: {
        std::vector<Contributors> sum = read(r, st.offset, st.count);  // own term: the input
        for (const auto& [q, block] : me.blocks)
          for (size_t i = 0; i < st.count && i < block.size(); ++i) sum[i] |= block[i];
        if (st.offset + st.count > me.output.size())
          throw std::logic_error("rank " + std::to_string(r) + " writes outside its output");
        std::copy(sum.begin(), sum.end(), me.output.begin() + static_cast<ptrdiff_t>(st.offset));
        break;
      }
      default: throw std::logic_error("not a FIFO one-shot primitive");
    }
    return true;
  };

  // One step of the rooted one-shot (algorithms/rooted_oneshot_program.h):
  // its pack, unpack and reduction, and the FIFO one-shot's steps, which
  // there send and sum the exchange instead of the input and the output.
  // False while it must wait; *in is the first message it takes, *out the
  // one it sends (-1: none).
  auto runExchangeStep = [&](int r, int round, const algo::TraceStep& st, int* in, int* out) {
    RankBuffers& me = ranks[r];
    auto span = [&](std::vector<Contributors>& buf, size_t at, size_t len) {
      if (at + len > buf.size())
        throw std::logic_error("rank " + std::to_string(r) + " goes outside a buffer");
      return buf.begin() + static_cast<ptrdiff_t>(at);
    };
    switch (st.kind) {
      case K::PackExchange: {
        const std::vector<Contributors> mine = read(r, st.inOffset, st.count);
        std::copy(mine.begin(), mine.end(), span(me.exchange, st.offset, st.count));
        break;
      }
      case K::Send:
        if (st.count > 0) *out = post(r, st.to, round, 0, me.exchange, false);
        break;
      case K::ReduceBlocks:
        for (const auto& [q, block] : me.blocks)
          for (size_t i = 0; i < me.exchange.size() && i < block.size(); ++i)
            me.exchange[i] |= block[i];
        break;
      case K::UnpackExchange: {
        auto from = span(me.exchange, st.inOffset, st.count);
        std::copy(from, from + static_cast<ptrdiff_t>(st.count), span(me.output, st.offset, st.count));
        break;
      }
      case K::ReduceExchange: {
        auto to = span(me.output, st.offset, st.count);
        for (size_t i = 0; i < st.count; ++i) {
          Contributors sum = 0;
          for (int q = 0; q < n; ++q) sum |= *span(me.exchange, q * st.count + i, 1);
          to[static_cast<ptrdiff_t>(i)] = sum;
        }
        break;
      }
      default: return runFifoOneShotStep(r, round, st, in);  // recvBlock, waitAll
    }
    return true;
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
      if (s.form == Form::kExchange) {
        int in = -1, out = -1;
        if (!runExchangeStep(r, round, st, &in, &out)) continue;
        s.actions.push_back({r, pc[r], round, st, in, out});
        ++pc[r];
        ran = true;
        continue;
      }
      if (algo::isWindowKind(st.kind) || algo::isFifoOneShotKind(st.kind)) {
        int firstIn = -1;
        const bool window = algo::isWindowKind(st.kind);
        if (!(window ? runWindowStep(r, round, st, &firstIn)
                     : runFifoOneShotStep(r, round, st, &firstIn)))
          continue;
        s.actions.push_back({r, pc[r], round, st, firstIn, -1});
        ++pc[r];
        ran = true;
        continue;
      }
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
    if (algo::isWindowKind(act.step.kind)) {
      // The window: a handshake per wait, β per byte copied in or out, and
      // an n-way reduction is n-1 reductions per byte.
      switch (act.step.kind) {
        case K::Wait: c.alphaUs = p.alphaUs; break;
        case K::Put:
        case K::CopyOut: c.betaUs = bytes * p.betaUsPerB; break;
        case K::ReduceToOutput:
        case K::ReduceToSlot: c.gammaUs = bytes * (s.request.nranks - 1) * p.gammaUsPerB; break;
        default: break;
      }
    } else if (algo::isFifoOneShotKind(act.step.kind)) {
      // One latency for all the blocks a waitAll takes (they travel at
      // once), β for every byte of them over this rank's link; the n-way
      // reduction is n-1 reductions per byte (one rank: a copy). The rooted
      // one-shot's messages are its whole exchange, records included, summed
      // as whole words; its root's reduction of the n blocks costs γ per
      // byte too; packing and unpacking (local copies of at most 64 KiB) are
      // left out, as the tuner leaves them out.
      const int n = s.request.nranks;
      const bool exchange = s.form == Form::kExchange;
      auto messageBytes = [&](size_t count) {
        const double payload = static_cast<double>(count) * esize;
        return exchange ? static_cast<double>(algo::rootedExchangeBytes(
                              n, static_cast<size_t>(payload)))
                        : payload;
      };
      switch (act.step.kind) {
        case K::WaitAll:
          for (const Message& m : s.messages)
            if (m.to == act.rank && m.receivedRound == act.round)
              c.betaUs += messageBytes(m.count) * p.betaUsPerB;
          if (act.messageIn >= 0) c.alphaUs = p.alphaUs;
          break;
        case K::ReduceBlocks:
          if (n == 1) c.betaUs = messageBytes(act.step.count) * p.betaUsPerB;
          else c.gammaUs = messageBytes(act.step.count) * (n - 1) * p.gammaUsPerB;
          break;
        case K::ReduceExchange: c.gammaUs = bytes * (n - 1) * p.gammaUsPerB; break;
        default: break;
      }
    } else {
      if (act.messageIn >= 0) c.alphaUs = p.alphaUs;
      if (act.messageIn >= 0 || act.step.kind == K::Copy) c.betaUs = bytes * p.betaUsPerB;
      if (reduces(act.step.kind)) c.gammaUs = bytes * p.gammaUsPerB;
    }
    if (c.total() > worst[act.round]) {
      worst[act.round] = c.total();
      costs[act.round] = c;
    }
  }
  return costs;
}

}  // namespace coil::sim
