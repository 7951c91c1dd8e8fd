// Small rooted calls without a shared window carry their data in the call
// agreement's one-shot: the rooted one-shot, "oneshot" to the tuner and
// COIL_ALGO (src/comm/fused_rooted_call.cc,
// src/algorithms/rooted_oneshot_program.h). These tests check
// the results against the independent reference at awkward sizes, roots,
// types and ops, in place and out of place, as threads and as processes;
// and, through coil's own log, that the fused path is the one that ran
// where it should (tcp, small; COIL_ALGO=oneshot) and not where it should
// not (shm's window, a large call, another algorithm forced by COIL_ALGO).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "harness/call_collective.h"
#include "harness/collective_reference.h"
#include "harness/reference.h"
#include "harness/run_ranks.h"

namespace coil::test {
namespace {

using K = algo::CollKind;

constexpr const char* kFusedLine = "data and agreement in one one-shot";

// Every case of one rank count: the four rooted collectives, counts 0, 1,
// fewer than the ranks, primes, and one far past the fused path's limit.
std::vector<CollectiveCase> casesFor(int nranks, bool large) {
  std::vector<CollectiveCase> out;
  const std::vector<size_t> counts =
      large ? std::vector<size_t>{40009} : std::vector<size_t>{0, 1, 2, 7, 13, 251};
  for (K kind : {K::Broadcast, K::Reduce, K::Gather, K::Scatter})
    for (size_t count : counts)
      for (int root : {0, nranks - 1})
        for (bool inPlace : {false, true}) {
          if (kind == K::Reduce) {
            out.push_back({kind, coilFloat32, coilSum, count, root, inPlace});
            out.push_back({kind, coilBfloat16, coilAvg, count, root, inPlace});
            out.push_back({kind, coilInt8, coilMax, count, root, inPlace});
            out.push_back({kind, coilInt64, coilProd, count, root, inPlace});
          } else {
            out.push_back({kind, coilFloat32, coilSum, count, root, inPlace});
            out.push_back({kind, coilInt8, coilSum, count, root, inPlace});
          }
        }
  return out;
}

// Runs the cases on this rank; every output checked where it is defined.
void runCases(coilComm_t comm, int rank, int nranks, const std::vector<CollectiveCase>& cases) {
  for (const CollectiveCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const size_t es = sizeOf(c.type);
    std::vector<uint8_t> send(std::max<size_t>(inputElems(c, nranks) * es, 1)),
        recv(std::max<size_t>(outputElems(c, nranks) * es, 1));
    const PlacedCall placed = placeCall(c, rank, nranks, send.data(), recv.data());
    ASSERT_EQ(callCollective(c, placed, comm, nullptr), coilSuccess) << coilGetLastError(comm);
    const std::vector<uint8_t> want = collectiveExpected(c, rank, nranks);
    if (!want.empty()) {
      ASSERT_EQ(firstMismatch(c.type, placed.recv, want.data(), outputElems(c, nranks)), SIZE_MAX);
    }
  }
}

size_t countLines(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find(what) != std::string::npos) ++n;
  return n;
}

// The calls that are not empty (an empty call returns before any
// exchange), except those of `unless`.
size_t nonEmpty(const std::vector<CollectiveCase>& cases, K unless = K::AllReduce) {
  size_t n = 0;
  for (const CollectiveCase& c : cases) n += c.count != 0 && c.kind != unless;
  return n;
}

class FusedRooted : public ::testing::TestWithParam<RankSetup> {};

TEST_P(FusedRooted, MatchesTheReference) {
  const RankSetup setup = GetParam();
  runRanks(setup, [&](coilComm_t comm, int rank) {
    runCases(comm, rank, setup.nranks, casesFor(setup.nranks, false));
    runCases(comm, rank, setup.nranks, casesFor(setup.nranks, true));
  });
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, FusedRooted,
    ::testing::Values(RankSetup{2, Launch::Threads, "tcp"}, RankSetup{3, Launch::Threads, "tcp"},
                      RankSetup{5, Launch::Threads, "tcp"}, RankSetup{7, Launch::Threads, "tcp"},
                      RankSetup{2, Launch::Processes, "tcp"},
                      RankSetup{3, Launch::Processes, "tcp"},
                      RankSetup{3, Launch::Threads, "shm"}),
    [](const ::testing::TestParamInfo<RankSetup>& info) { return paramName(info.param); });

// How many calls took the fused path, from coil's COLL log of one run.
struct PathCount {
  size_t fused;
  size_t calls;
};
PathCount fusedCalls(const std::string& transport, bool large, const char* algo) {
  // A new file each run: coil keeps a log file open while COIL_DEBUG_FILE
  // stays the same (so that coilResetDebugInit does not truncate it), and
  // lines written after this one is removed would go to the removed file.
  static int runs = 0;
  const std::string log = ::testing::TempDir() + "coil_fused_rooted_" + transport + "_" +
                          std::to_string(++runs) + ".log";
  std::remove(log.c_str());
  ScopedEnv level("COIL_DEBUG", "INFO");
  ScopedEnv subsys("COIL_DEBUG_SUBSYS", "COLL");
  ScopedEnv file("COIL_DEBUG_FILE", log);
  ScopedEnv forced("COIL_ALGO", algo);
  coilResetDebugInit();
  constexpr int kRanks = 3;
  const std::vector<CollectiveCase> cases = casesFor(kRanks, large);
  runRanks({kRanks, Launch::Threads, transport},
           [&](coilComm_t comm, int rank) { runCases(comm, rank, kRanks, cases); });
  coilResetDebugInit();
  const size_t fused = countLines(log, kFusedLine);
  EXPECT_GT(countLines(log, " COLL "), 0u) << "nothing logged: a count of 0 would prove nothing";
  std::remove(log.c_str());
  return {fused, nonEmpty(cases) * kRanks};
}

TEST(FusedRootedPath, TakenBySmallCallsOverTcp) {
  const PathCount p = fusedCalls("tcp", false, "");
  EXPECT_EQ(p.fused, p.calls);
}

TEST(FusedRootedPath, NotTakenByLargeCalls) {
  EXPECT_EQ(fusedCalls("tcp", true, "").fused, 0u);
}

TEST(FusedRootedPath, NotTakenThroughTheSharedWindow) {
  EXPECT_EQ(fusedCalls("shm", false, "").fused, 0u);
}

TEST(FusedRootedPath, NotTakenWhenCoilAlgoChoosesTheAlgorithm) {
  // COIL_ALGO forces broadcast's algorithm only: the other three still fuse.
  const PathCount p = fusedCalls("tcp", false, "broadcast:ring");
  EXPECT_EQ(p.fused, nonEmpty(casesFor(3, false), K::Broadcast) * 3);
  EXPECT_LT(p.fused, p.calls);
}

// COIL_ALGO=oneshot forces it where it can run, and leaves the rest to the
// model (said once in the TUNE log, not an error): a large call, the window.
TEST(FusedRootedPath, ForcedByCoilAlgoWhereItCanRun) {
  const PathCount small = fusedCalls("tcp", false, "oneshot");
  EXPECT_EQ(small.fused, small.calls);
  EXPECT_EQ(fusedCalls("tcp", true, "broadcast:oneshot,reduce:oneshot").fused, 0u);
  EXPECT_EQ(fusedCalls("shm", false, "oneshot").fused, 0u);
}

// coilGroupSimulateEnd's estimate of one call, on this rank.
float estimate(const std::function<coilResult_t()>& call) {
  coilSimInfo_t info = COIL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(coilGroupStart(), coilSuccess);
  EXPECT_EQ(call(), coilSuccess) << coilGetLastError(nullptr);
  EXPECT_EQ(coilGroupSimulateEnd(&info), coilSuccess) << coilGetLastError(nullptr);
  return info.estimatedTime;
}

// The estimate follows what runs: a fused broadcast costs the one-shot
// all-reduce of its exchange (2 records of 24 bytes and the payload); one
// whose algorithm COIL_ALGO forces pays the agreement and the call.
TEST(FusedRootedEstimate, IsTheOneShotOfTheExchange) {
  for (const char* algo : {"", "broadcast:tree"}) {
    SCOPED_TRACE(std::string("COIL_ALGO=") + algo);
    ScopedEnv forced("COIL_ALGO", algo);
    runRanks({2, Launch::Threads, "tcp"}, [&](coilComm_t comm, int) {
      std::vector<float> data(100, 1.0f);
      std::vector<uint64_t> exchange((2 * 24 + data.size() * sizeof(float)) / 8);
      const float bcast = estimate([&] {
        return coilBroadcast(data.data(), data.data(), data.size(), coilFloat, 0, comm, nullptr);
      });
      const float oneShot = estimate([&] {
        return coilAllReduce(exchange.data(), exchange.data(), exchange.size(), coilUint64,
                             coilSum, comm, nullptr);
      });
      if (*algo == '\0') {
        EXPECT_FLOAT_EQ(bcast, oneShot);
      } else {
        EXPECT_GT(bcast, oneShot);
      }
    });
  }
}

}  // namespace
}  // namespace coil::test
