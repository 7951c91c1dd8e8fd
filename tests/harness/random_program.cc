#include "harness/random_program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <utility>

#include "harness/call_collective.h"
#include "harness/reference.h"
#include "harness/run_ranks.h"

namespace coil::test::programs {
namespace {

using K = algo::CollKind;

constexpr int kSteps = 48;
// How often a program waits for its calls to complete, where they go on a
// stream (host calls complete on return whatever this says).
constexpr int kWaitPercent = 40;
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

// A step whose calls were made and whose results are still to be checked:
// its buffers, and what each output must hold.
struct MadeStep {
  std::string where;
  struct Output {
    std::string what;
    coilDataType_t type;
    const uint8_t* data;
    size_t count;
    std::vector<uint8_t> want;
  };
  std::vector<Output> outputs;
  std::vector<std::shared_ptr<uint8_t>> buffers;
};

// Makes one step's calls on this rank; false (after recording why) when a
// call failed.
bool makeStep(const Step& s, coilComm_t comm, int rank, int n, Memory& memory, MadeStep* made) {
  const std::vector<Post> order = postingOrder(s, rank);
  auto failed = [&](coilResult_t rc, const std::string& what) {
    if (rc == coilSuccess) return false;
    ADD_FAILURE() << made->where << ": " << what << " returned " << coilGetErrorString(rc) << ": "
                  << coilGetLastError(comm) << "\n  the step: " << describe(s, order, rank);
    return true;
  };
  coilStream_t stream = memory.streamOf(comm);
  if (s.barrier) return !failed(coilBarrier(comm, stream), "barrier");
  auto buffer = [&](size_t bytes) {
    made->buffers.push_back(memory.allocate(std::max<size_t>(bytes, 1)));
    return made->buffers.back().get();
  };

  std::vector<PlacedCall> placed(s.calls.size());
  for (size_t i = 0; i < s.calls.size(); ++i) {
    const CollectiveCase& c = s.calls[i];
    const size_t es = sizeOf(c.type);
    placed[i] = placeCall(c, rank, n, buffer(inputElems(c, n) * es), buffer(outputElems(c, n) * es));
    std::vector<uint8_t> want = collectiveExpected(c, rank, n);
    if (!want.empty())
      made->outputs.push_back({describe(c), c.type, static_cast<const uint8_t*>(placed[i].recv),
                               outputElems(c, n), std::move(want)});
  }
  // Each end of a message has its own buffer (both, for one to the rank
  // itself): the sender's holds the message, the receiver's 0xA5.
  std::vector<uint8_t*> sendFrom(s.messages.size()), recvInto(s.messages.size());
  for (size_t i = 0; i < s.messages.size(); ++i) {
    const Message& m = s.messages[i];
    if (m.src != rank && m.dst != rank) continue;
    const size_t bytes = m.count * sizeOf(m.type);
    std::vector<uint8_t> data = messageData(m);
    if (m.src == rank) {
      sendFrom[i] = buffer(bytes);
      std::copy_n(data.begin(), bytes, sendFrom[i]);
    }
    if (m.dst == rank) {
      recvInto[i] = buffer(bytes);
      std::fill_n(recvInto[i], bytes, uint8_t{0xA5});
      made->outputs.push_back({describe(m), m.type, recvInto[i], m.count, std::move(data)});
    }
  }

  // A crash leaves no gtest message: COIL_PROGRAM_TRACE shows the step.
  if (const char* t = std::getenv("COIL_PROGRAM_TRACE"); t != nullptr && *t != '\0' && *t != '0')
    std::fprintf(stderr, "%s: %s\n", made->where.c_str(), describe(s, order, rank).c_str());
  if (s.grouped && failed(coilGroupStart(), "coilGroupStart")) return false;
  bool ok = true;
  for (const Post& p : order) {
    if (p.isCall) {
      const CollectiveCase& c = s.calls[p.index];
      ok = !failed(callCollective(c, placed[p.index], comm, stream), describe(c));
    } else {
      const Message& m = s.messages[p.index];
      ok = p.isSend ? !failed(coilSend(sendFrom[p.index], m.count, m.type, m.dst, comm, stream),
                              "send of " + describe(m))
                    : !failed(coilRecv(recvInto[p.index], m.count, m.type, m.src, comm, stream),
                              "receive of " + describe(m));
    }
    if (!ok) break;
  }
  if (s.grouped) ok = !failed(coilGroupEnd(), "coilGroupEnd") && ok;
  return ok;
}

// Waits for the calls of `made` on `comm`, then checks each output; false
// when a call failed after it returned.
bool checkSteps(coilComm_t comm, Memory& memory, std::vector<MadeStep>* made) {
  const coilResult_t rc = memory.finish(comm);
  if (rc != coilSuccess) {
    ADD_FAILURE() << (made->empty() ? std::string("a call") : made->back().where)
                  << " or a call before it failed after it returned: " << coilGetErrorString(rc)
                  << ": " << coilGetLastError(comm);
    made->clear();
    return false;
  }
  for (const MadeStep& step : *made)
    for (const MadeStep::Output& o : step.outputs) {
      const size_t at = firstMismatch(o.type, o.data, o.want.data(), o.count);
      EXPECT_EQ(at, SIZE_MAX) << step.where << ": " << o.what << ": element " << at << " differs";
    }
  made->clear();
  return true;
}

}  // namespace

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

Program drawProgram(uint64_t seed) {
  Draw d(seed * 0x2545F4914F6CDD1DULL + 1);
  static const std::vector<std::string> kAlgos{
      "", "", "", "allreduce:tree,broadcast:tree,reduce:tree",
      "allreduce:ring,broadcast:ring,reduce:chain", "oneshot", "allreduce:slice"};
  Program p;
  p.algo = d.pick(kAlgos);
  // From draws of their own, so that adding them left the programs as
  // they were.
  p.splitShare = Draw(seed ^ 0x5A17ULL).chance(50);
  p.splitNonBlocking = Draw(seed ^ 0xB10CULL).chance(50);
  Draw waits(seed ^ 0x3A175ULL);
  bool onChild = false;
  for (int i = 0; i < kSteps; ++i) {
    if (d.chance(15)) onChild = !onChild;
    p.steps.push_back({onChild, d.next(), waits.chance(kWaitPercent)});
  }
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (i + 1 == p.steps.size() || p.steps[i + 1].onChild != p.steps[i].onChild)
      p.steps[i].waitAfter = true;
  return p;
}

void runProgram(uint64_t seed, const Program& p, coilComm_t world, int rank, int n,
                Memory& memory) {
  // The program uses one communicator at a time and waits for its calls
  // before it moves to the other, so a child on the world's connections
  // (splitShare) is used as coilCommSplit allows.
  coilComm_t child = nullptr;
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.splitShare = p.splitShare ? 1 : 0;
  config.blocking = p.splitNonBlocking ? 0 : 1;
  const coilResult_t split = coilCommSplit(world, rank % 2, n - rank, &child, &config);
  ASSERT_TRUE(split == coilSuccess || (p.splitNonBlocking && split == coilInProgress))
      << coilGetErrorString(split) << ": " << coilGetLastError(world);
  // The child is asked its rank and size when the program first moves to
  // it; a non-blocking one is polled only then: until then the world runs
  // its steps while the child joins.
  int childRank = 0, childSize = 0;
  const std::string childName = std::string("child (") +
                                (p.splitShare ? "split shared" : "split") +
                                (p.splitNonBlocking ? ", non-blocking)" : ")");
  std::vector<MadeStep> made;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Program::Entry& e = p.steps[i];
    if (e.onChild && childSize == 0) {
      if (p.splitNonBlocking) {
        ASSERT_EQ(waitReady(child, 60), coilSuccess)
            << "COIL_PROGRAM_SEED=" << seed << ": the non-blocking child: "
            << coilGetLastError(child);
      }
      coilCommUserRank(child, &childRank);
      coilCommCount(child, &childSize);
    }
    coilComm_t comm = e.onChild ? child : world;
    const int r = e.onChild ? childRank : rank, size = e.onChild ? childSize : n;
    std::ostringstream where;
    where << "COIL_PROGRAM_SEED=" << seed << " step " << i << " on the "
          << (e.onChild ? childName : "world")
          << " (COIL_ALGO=" << p.algo << "), rank " << r << " of " << size;
    made.push_back({where.str(), {}, {}});
    if (!makeStep(drawStep(e.seed, size), comm, r, size, memory, &made.back())) {
      memory.finish(comm);  // (failed) so that no queued call outlives its buffers
      break;
    }
    if (e.waitAfter && !checkSteps(comm, memory, &made)) break;
  }
  if (childSize == 0 && p.splitNonBlocking) {  // never used: still, it must have joined
    EXPECT_EQ(waitReady(child, 60), coilSuccess) << coilGetLastError(child);
  }
  EXPECT_EQ(coilCommDestroy(child), coilSuccess);
}

std::vector<uint64_t> seedsFrom(uint64_t base, uint64_t programs) {
  if (const char* one = std::getenv("COIL_PROGRAM_SEED"); one != nullptr && *one != '\0')
    return {std::strtoull(one, nullptr, 10)};
  const char* k = std::getenv("COIL_PROGRAMS");
  if (k != nullptr && *k != '\0') programs = std::strtoull(k, nullptr, 10);
  std::vector<uint64_t> seeds;
  for (uint64_t i = 0; i < programs; ++i) seeds.push_back(base + i);
  return seeds;
}

}  // namespace coil::test::programs
