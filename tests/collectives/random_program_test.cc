// Random programs: long sequences of the calls real programs make, mixed as
// they mix them, every result checked against the independent reference
// (harness/collective_reference.h).
//
// The feature tests each check one thing, mostly on a fresh communicator.
// Programs do not. One communicator runs collectives of every kind, type,
// op, root and size one after another, so the tuner moves between
// algorithms and the transports' windows, FIFOs and slots are reused by
// calls of other kinds and sizes. Groups hold collectives of different
// kinds, sends and receives in any posting order (two messages on one peer,
// a send to the rank itself), or both at once. Every few calls the program
// moves to a child of a split and back. A seed draws the program, the same
// on every rank, and the COIL_ALGO it runs under; each call's data carries a
// salt drawn with it, so an output left over from an earlier call of the same
// shape cannot pass for this one's.
//
// A failure names its seed: COIL_PROGRAM_SEED=<seed> runs that program alone.
// COIL_PROGRAMS=<k> runs k programs per setup instead of 3, to hunt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "harness/call_collective.h"
#include "harness/collective_reference.h"
#include "harness/reference.h"
#include "harness/run_ranks.h"

namespace coil::test {
namespace {

using K = algo::CollKind;

constexpr int kSteps = 48;
// No buffer of a call holds more than this, so that 7 ranks as threads
// stay small and quick.
constexpr size_t kMaxBufferBytes = size_t{1} << 20;

// Draws from one seed; every rank that draws from the same seed gets the
// same values.
class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_(seed) {}
  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(int percent) { return below(100) < static_cast<uint64_t>(percent); }
  uint64_t next() { return rng_(); }
  template <typename T>
  const T& pick(const std::vector<T>& from) { return from[below(from.size())]; }

 private:
  std::mt19937_64 rng_;
};

// A count as programs have them: mostly small, sometimes 0, 1 or about the
// rank count, primes throughout, now and then large enough for the
// bandwidth algorithms; capped so that no buffer passes kMaxBufferBytes.
size_t drawCount(Draw& d, int n, size_t elemBytes, size_t blocks) {
  static const std::vector<size_t> kTiny{0, 1, 2, 3}, kSmall{7, 13, 31, 97, 251, 509, 1021},
      kMedium{4093, 8191, 16381, 32749}, kLarge{65521, 131071, 262139};
  const uint64_t r = d.below(100);
  size_t count = r < 10   ? d.pick(kTiny)
                 : r < 20 ? static_cast<size_t>(n) + d.below(3) - 1  // n - 1 .. n + 1
                 : r < 55 ? d.pick(kSmall)
                 : r < 85 ? d.pick(kMedium)
                          : d.pick(kLarge);
  return std::min(count, kMaxBufferBytes / (elemBytes * blocks));
}

CollectiveCase drawCall(Draw& d, int n) {
  static const std::vector<K> kKinds{K::AllReduce, K::Broadcast, K::Reduce,  K::AllGather,
                                     K::ReduceScatter, K::AllToAll, K::Gather, K::Scatter};
  CollectiveCase c{};
  c.kind = d.pick(kKinds);
  c.type = static_cast<coilDataType_t>(d.below(coilNumTypes));
  do {
    c.op = static_cast<coilRedOp_t>(d.below(coilNumOps));
  } while (!opTakesType(c.op, c.type));
  c.root = static_cast<int>(d.below(static_cast<uint64_t>(n)));
  c.inPlace = d.chance(35) && c.kind != K::AllToAll;  // which coil refuses, naming it
  const bool blocks = c.kind != K::AllReduce && c.kind != K::Broadcast && c.kind != K::Reduce;
  c.count = drawCount(d, n, sizeOf(c.type), blocks ? static_cast<size_t>(n) : 1);
  c.salt = static_cast<uint32_t>(d.below(251));
  return c;
}

// One point-to-point message of a group, between ranks of the step's
// communicator (src == dst: a send to the rank itself).
struct Message {
  int src, dst;
  size_t count;
  coilDataType_t type;
  uint32_t salt;
};

std::string describe(const Message& m) {
  std::ostringstream s;
  s << "message " << m.src << " -> " << m.dst << " of " << m.count << " " << nameOf(m.type)
    << " salt " << m.salt;
  return s.str();
}

// What message m carries: distinct per message and element, exact in
// every type (below 251).
std::vector<uint8_t> messageData(const Message& m) {
  std::vector<uint8_t> buf(std::max<size_t>(m.count * sizeOf(m.type), 1));
  for (size_t i = 0; i < m.count; ++i)
    storeInt(m.type, buf.data(), i,
             static_cast<int64_t>((m.salt + i * 3 + static_cast<size_t>(m.src) * 7 +
                                   static_cast<size_t>(m.dst) * 11) % 251));
  return buf;
}

// One step of a program, as a communicator of n ranks runs it: a barrier,
// one collective on its own, or a group of collectives and messages.
struct Step {
  bool barrier = false;
  bool grouped = false;
  std::vector<CollectiveCase> calls;
  std::vector<Message> messages;
  uint64_t orderSeed = 0;  // how each rank orders its part of a group
};

Step drawStep(uint64_t stepSeed, int n) {
  Draw d(stepSeed);
  Step s;
  s.orderSeed = d.next();
  const uint64_t r = d.below(100);
  if (r < 8) {
    s.barrier = true;
    return s;
  }
  if (r < 55) {
    s.calls.push_back(drawCall(d, n));
    return s;
  }
  s.grouped = true;
  const bool withCalls = r < 70 || r >= 90, withMessages = r >= 70;
  if (withCalls)
    for (uint64_t k = withMessages ? 1 + d.below(2) : 2 + d.below(3); k > 0; --k)
      s.calls.push_back(drawCall(d, n));
  if (withMessages)
    for (uint64_t k = 1 + d.below(2 * static_cast<uint64_t>(n)); k > 0; --k) {
      Message m{};
      m.src = static_cast<int>(d.below(static_cast<uint64_t>(n)));
      // One in four to the sender's next rank, so that one pair often
      // carries several messages; now and then to the sender itself.
      m.dst = d.chance(25) ? (m.src + 1) % n : static_cast<int>(d.below(static_cast<uint64_t>(n)));
      m.type = static_cast<coilDataType_t>(d.below(coilNumTypes));
      m.count = drawCount(d, n, sizeOf(m.type), 1);
      m.salt = static_cast<uint32_t>(d.below(251));
      s.messages.push_back(m);
    }
  return s;
}

// What one rank posts in a group, in the order it posts it: its
// collectives in program order (as every rank must), its sends and
// receives in an order of its own, interleaved with them. Between two
// ranks, messages keep the program's order (that is how they match, as in
// NCCL); everything else is shuffled.
struct Post {
  bool isCall;
  size_t index;  // into Step::calls, or Step::messages
  bool isSend;
};

std::vector<Post> postingOrder(const Step& s, int rank) {
  std::vector<Post> p2p;
  for (size_t i = 0; i < s.messages.size(); ++i) {
    const Message& m = s.messages[i];
    if (m.src == rank) p2p.push_back({false, i, true});
    if (m.dst == rank) p2p.push_back({false, i, false});
  }
  std::mt19937_64 rng(s.orderSeed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(rank + 1)));
  // Shuffle, then give each (direction, peer) class its messages back in
  // program order, in the places the shuffle left for that class.
  std::vector<Post> shuffled = p2p;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  auto classOf = [&](const Post& p) {
    const Message& m = s.messages[p.index];
    return std::make_pair(p.isSend, p.isSend ? m.dst : m.src);
  };
  std::map<std::pair<bool, int>, std::vector<Post>> inOrder;
  for (const Post& p : p2p) inOrder[classOf(p)].push_back(p);
  std::map<std::pair<bool, int>, size_t> taken;
  for (Post& p : shuffled) {
    const auto cls = classOf(p);
    p = inOrder[cls][taken[cls]++];
  }
  std::vector<Post> out;
  size_t call = 0, msg = 0;
  while (call < s.calls.size() || msg < shuffled.size()) {
    const bool takeCall =
        msg == shuffled.size() || (call < s.calls.size() && rng() % 2 == 0);
    if (takeCall) out.push_back({true, call++, false});
    else out.push_back(shuffled[msg++]);
  }
  return out;
}

// A program: which communicator each step runs on, and the seed it is
// drawn from (drawn again on each communicator, for its rank count).
struct Program {
  std::string algo;  // COIL_ALGO
  bool splitShare;   // the child sends over the world's connections
  std::vector<std::pair<bool, uint64_t>> steps;  // (on the child, step seed)
};

Program drawProgram(uint64_t seed) {
  Draw d(seed * 0x2545F4914F6CDD1DULL + 1);
  static const std::vector<std::string> kAlgos{
      "", "", "", "allreduce:tree,broadcast:tree,reduce:tree",
      "allreduce:ring,broadcast:ring,reduce:chain", "oneshot", "allreduce:slice"};
  Program p;
  p.algo = d.pick(kAlgos);
  p.splitShare = Draw(seed ^ 0x5A17ULL).chance(50);
  bool onChild = false;
  for (int i = 0; i < kSteps; ++i) {
    if (d.chance(15)) onChild = !onChild;
    p.steps.emplace_back(onChild, d.next());
  }
  return p;
}

// The buffers of one call or message, alive until its group ends.
struct CallBuffers {
  std::vector<uint8_t> send, recv;
  PlacedCall placed{};
};

class RandomPrograms : public ::testing::TestWithParam<RankSetup> {};

// "group of: allreduce ..., message 0 -> 1 ...; rank 1 posts: call 0, send 1,
// receive 0", for failure messages.
std::string describe(const Step& s, const std::vector<Post>& order, int rank) {
  if (s.barrier) return "barrier";
  std::ostringstream out;
  out << (s.grouped ? "group of: " : "");
  const char* sep = "";
  for (const CollectiveCase& c : s.calls) out << std::exchange(sep, ", ") << describe(c);
  for (const Message& m : s.messages) out << std::exchange(sep, ", ") << describe(m);
  if (!s.grouped) return out.str();
  out << "; rank " << rank << " posts:";
  sep = " ";
  for (const Post& p : order)
    out << std::exchange(sep, ", ") << (p.isCall ? "call " : p.isSend ? "send " : "receive ")
        << p.index;
  return out.str();
}

// Runs one step on this rank; false (after recording why) when a call
// failed, after which the rank stops: its peers' next calls fail on their
// own deadlines or on its departure.
bool runStep(const Step& s, coilComm_t comm, int rank, int n, const std::string& where) {
  const std::vector<Post> order = postingOrder(s, rank);
  auto failed = [&](coilResult_t rc, const std::string& what) {
    if (rc == coilSuccess) return false;
    ADD_FAILURE() << where << ", rank " << rank << " of " << n << ": " << what << " returned "
                  << coilGetErrorString(rc) << ": " << coilGetLastError(comm)
                  << "\n  the step: " << describe(s, order, rank);
    return true;
  };
  if (s.barrier) return !failed(coilBarrier(comm, nullptr), "barrier");

  std::vector<CallBuffers> calls(s.calls.size()), messages(s.messages.size());
  for (size_t i = 0; i < s.calls.size(); ++i) {
    const CollectiveCase& c = s.calls[i];
    const size_t es = sizeOf(c.type);
    calls[i].send.resize(std::max<size_t>(inputElems(c, n) * es, 1));
    calls[i].recv.resize(std::max<size_t>(outputElems(c, n) * es, 1));
    calls[i].placed = placeCall(c, rank, n, calls[i].send.data(), calls[i].recv.data());
  }
  if (s.grouped && failed(coilGroupStart(), "coilGroupStart")) return false;
  bool ok = true;
  for (const Post& p : order) {
    if (p.isCall) {
      const CollectiveCase& c = s.calls[p.index];
      ok = !failed(callCollective(c, calls[p.index].placed, comm, nullptr), describe(c));
    } else {
      const Message& m = s.messages[p.index];
      CallBuffers& b = messages[p.index];
      if (p.isSend) {
        b.send = messageData(m);
        ok = !failed(coilSend(b.send.data(), m.count, m.type, m.dst, comm, nullptr),
                     "send of " + describe(m));
      } else {
        b.recv.assign(std::max<size_t>(m.count * sizeOf(m.type), 1), uint8_t{0xA5});
        ok = !failed(coilRecv(b.recv.data(), m.count, m.type, m.src, comm, nullptr),
                     "receive of " + describe(m));
      }
    }
    if (!ok) break;
  }
  if (s.grouped) ok = !failed(coilGroupEnd(), "coilGroupEnd") && ok;
  if (!ok) return false;

  for (size_t i = 0; i < s.calls.size(); ++i) {
    const CollectiveCase& c = s.calls[i];
    const std::vector<uint8_t> want = collectiveExpected(c, rank, n);
    if (want.empty()) continue;
    const size_t at = firstMismatch(c.type, calls[i].placed.recv, want.data(), outputElems(c, n));
    EXPECT_EQ(at, SIZE_MAX) << where << ", rank " << rank << " of " << n << ": " << describe(c)
                            << ": element " << at << " differs";
  }
  for (size_t i = 0; i < s.messages.size(); ++i) {
    const Message& m = s.messages[i];
    if (m.dst != rank) continue;
    const std::vector<uint8_t> want = messageData(m);
    const size_t at = firstMismatch(m.type, messages[i].recv.data(), want.data(), m.count);
    EXPECT_EQ(at, SIZE_MAX) << where << ", rank " << rank << " of " << n << ": " << describe(m)
                            << ": element " << at << " differs";
  }
  return true;
}

// Runs program `seed` on this rank's world communicator and a child of it
// (odd and even ranks, highest first), made at the start. The program uses
// one at a time, so a child on the world's connections (splitShare) is
// used as coilCommSplit allows.
void runProgram(uint64_t seed, const Program& p, coilComm_t world, int rank, int n) {
  coilComm_t child = nullptr;
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.splitShare = p.splitShare ? 1 : 0;
  ASSERT_EQ(coilCommSplit(world, rank % 2, n - rank, &child, &config), coilSuccess)
      << coilGetLastError(world);
  int childRank = 0, childSize = 0;
  coilCommUserRank(child, &childRank);
  coilCommCount(child, &childSize);
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const auto [onChild, stepSeed] = p.steps[i];
    std::ostringstream where;
    where << "COIL_PROGRAM_SEED=" << seed << " step " << i << " on the "
          << (onChild ? (p.splitShare ? "child (split shared)" : "child") : "world")
          << " (COIL_ALGO=" << p.algo << ")";
    const bool ok = onChild ? runStep(drawStep(stepSeed, childSize), child, childRank, childSize,
                                      where.str())
                            : runStep(drawStep(stepSeed, n), world, rank, n, where.str());
    if (!ok) break;
  }
  EXPECT_EQ(coilCommDestroy(child), coilSuccess);
}

std::vector<uint64_t> seedsFor(const RankSetup& setup) {
  if (const char* one = std::getenv("COIL_PROGRAM_SEED"); one != nullptr && *one != '\0')
    return {std::strtoull(one, nullptr, 10)};
  const char* k = std::getenv("COIL_PROGRAMS");
  const uint64_t programs = k != nullptr && *k != '\0' ? std::strtoull(k, nullptr, 10) : 3;
  // Different setups run different programs; each setup the same ones
  // every time, so that a failure in CI comes back here.
  uint64_t base = static_cast<uint64_t>(setup.nranks) * 1000 +
                  (setup.launch == Launch::Threads ? 0 : 100) +
                  (setup.transport == "tcp" ? 10000 : 0);
  std::vector<uint64_t> seeds;
  for (uint64_t i = 0; i < programs; ++i) seeds.push_back(base + i);
  return seeds;
}

TEST_P(RandomPrograms, EveryCallOfTheProgramMatchesTheReference) {
  for (uint64_t seed : seedsFor(GetParam())) {
    const Program program = drawProgram(seed);
    SCOPED_TRACE(::testing::Message() << "COIL_PROGRAM_SEED=" << seed);
    ScopedEnv algo("COIL_ALGO", program.algo);
    runRanks(GetParam(), [&](coilComm_t world, int rank) {
      runProgram(seed, program, world, rank, GetParam().nranks);
    });
  }
}

std::vector<RankSetup> setups(Launch launch) {
  std::vector<RankSetup> out;
  for (const std::string& transport : testedTransports())
    for (int n : {2, 3, 4, 5, 7}) out.push_back({n, launch, transport});
  return out;
}

std::string name(const ::testing::TestParamInfo<RankSetup>& info) { return paramName(info.param); }

INSTANTIATE_TEST_SUITE_P(Threads, RandomPrograms, ::testing::ValuesIn(setups(Launch::Threads)),
                         name);
INSTANTIATE_TEST_SUITE_P(Procs, RandomPrograms, ::testing::ValuesIn(setups(Launch::Processes)),
                         name);

}  // namespace
}  // namespace coil::test
