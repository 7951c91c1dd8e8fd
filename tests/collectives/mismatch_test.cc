// Mismatched programs: ranks that call different collectives, or the same
// collective with a different count, datatype, op or root, at the same
// point of their programs. Each kind runs over shm and tcp, with 2 and 3
// ranks (the last rank is the odd one out), as threads and as processes.
//
// Every rank must get an error, none by the timeout (60 s here; a mismatch
// must be found in well under 5 s), no rank may return success from the
// mismatched call with data the others did not compute, and the ranks that
// detect it name the mismatch. The one exception is a point-to-point
// sender: a send completes locally (as in NCCL), so it learns of the
// receiver's error on its next call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "harness/run_ranks.h"

namespace coil::test {
namespace {

constexpr double kDetectSeconds = 5.0;

// One rank's side of the mismatched call. `odd`: this rank is the odd one.
using Side = std::function<coilResult_t(coilComm_t comm, int rank, int n, bool odd)>;

struct Kind {
  const char* name;
  Side call;
  bool oddSendsOnly = false;  // the odd rank only sends (point-to-point)
};

// Buffers big enough for every call below (all-gather of 70001 x 3 ranks).
struct Buffers {
  std::vector<float> send = std::vector<float>(1 << 20, 1.0f);
  std::vector<float> recv = std::vector<float>(1 << 20, 0.0f);
};
thread_local Buffers* tls = nullptr;

float* S() { return tls->send.data(); }
float* R() { return tls->recv.data(); }

coilResult_t allReduce(coilComm_t c, size_t count, coilDataType_t t = coilFloat,
                       coilRedOp_t op = coilSum) {
  return coilAllReduce(S(), R(), count, t, op, c, nullptr);
}
coilResult_t broadcast(coilComm_t c, size_t count, int root) {
  return coilBroadcast(S(), R(), count, coilFloat, root, c, nullptr);
}
coilResult_t reduce(coilComm_t c, size_t count, int root) {
  return coilReduce(S(), R(), count, coilFloat, coilSum, root, c, nullptr);
}
coilResult_t gather(coilComm_t c, size_t count, int root) {
  return coilGather(S(), R(), count, coilFloat, root, c, nullptr);
}
coilResult_t scatter(coilComm_t c, size_t count, int root) {
  return coilScatter(S(), R(), count, coilFloat, root, c, nullptr);
}
coilResult_t allGather(coilComm_t c, size_t count) {
  return coilAllGather(S(), R(), count, coilFloat, c, nullptr);
}
coilResult_t reduceScatter(coilComm_t c, size_t count) {
  return coilReduceScatter(S(), R(), count, coilFloat, coilSum, c, nullptr);
}

const Kind kKinds[] = {
    {"allreduce_count", [](coilComm_t c, int, int, bool odd) { return allReduce(c, odd ? 16 : 8); }},
    {"allreduce_large_count",
     [](coilComm_t c, int, int, bool odd) { return allReduce(c, odd ? 300000 : 300001); }},
    {"allreduce_dtype",
     [](coilComm_t c, int, int, bool odd) { return allReduce(c, 64, odd ? coilInt32 : coilFloat); }},
    {"allreduce_op",
     [](coilComm_t c, int, int, bool odd) { return allReduce(c, 64, coilFloat, odd ? coilMax : coilSum); }},
    {"allreduce_vs_broadcast",
     [](coilComm_t c, int, int, bool odd) { return odd ? broadcast(c, 64, 0) : allReduce(c, 64); }},
    {"allreduce_vs_allgather",
     [](coilComm_t c, int, int, bool odd) { return odd ? allGather(c, 64) : allReduce(c, 64); }},
    {"allreduce_vs_barrier",
     [](coilComm_t c, int, int, bool odd) { return odd ? coilBarrier(c, nullptr) : allReduce(c, 1); }},
    {"allreduce_vs_reduce",
     [](coilComm_t c, int, int, bool odd) { return odd ? reduce(c, 64, 0) : allReduce(c, 64); }},
    {"broadcast_root",
     [](coilComm_t c, int, int n, bool odd) { return broadcast(c, 64, odd ? n - 1 : 0); }},
    {"broadcast_root_large",
     [](coilComm_t c, int, int n, bool odd) { return broadcast(c, 300001, odd ? n - 1 : 0); }},
    {"broadcast_count",
     [](coilComm_t c, int, int, bool odd) { return broadcast(c, odd ? 65 : 64, 0); }},
    {"broadcast_vs_reduce",
     [](coilComm_t c, int, int, bool odd) { return odd ? reduce(c, 64, 0) : broadcast(c, 64, 0); }},
    {"reduce_root", [](coilComm_t c, int, int n, bool odd) { return reduce(c, 64, odd ? n - 1 : 0); }},
    {"gather_root", [](coilComm_t c, int, int n, bool odd) { return gather(c, 64, odd ? n - 1 : 0); }},
    {"scatter_root", [](coilComm_t c, int, int n, bool odd) { return scatter(c, 64, odd ? n - 1 : 0); }},
    {"gather_vs_scatter",
     [](coilComm_t c, int, int, bool odd) { return odd ? scatter(c, 64, 0) : gather(c, 64, 0); }},
    {"allgather_count",
     [](coilComm_t c, int, int, bool odd) { return allGather(c, odd ? 70001 : 70000); }},
    {"allgather_vs_reducescatter",
     [](coilComm_t c, int, int, bool odd) { return odd ? reduceScatter(c, 64) : allGather(c, 64); }},
    {"alltoall_vs_allgather",
     [](coilComm_t c, int, int, bool odd) {
       return odd ? coilAlltoAll(S(), R(), 64, coilFloat, c, nullptr) : allGather(c, 64);
     }},
    {"sendrecv_count",
     [](coilComm_t c, int rank, int n, bool odd) {
       // The odd rank sends 100 floats to rank 0, which expects 99; the
       // others (3 ranks) do nothing.
       if (odd) return coilSend(S(), 100, coilFloat, 0, c, nullptr);
       if (rank == 0) return coilRecv(R(), 99, coilFloat, n - 1, c, nullptr);
       return coilSuccess;
     },
     true},
    // An empty message is a message: matched with one that is not, both
    // ranks learn of it, the receiver at once (its call must not succeed
    // with nothing received, nor leave the 100 floats for a later call).
    {"sendrecv_something_for_nothing",
     [](coilComm_t c, int rank, int n, bool odd) {
       if (odd) return coilSend(S(), 100, coilFloat, 0, c, nullptr);
       if (rank == 0) return coilRecv(R(), 0, coilFloat, n - 1, c, nullptr);
       return coilSuccess;
     },
     true},
    {"sendrecv_nothing_for_something",
     [](coilComm_t c, int rank, int n, bool odd) {
       if (odd) return coilSend(S(), 0, coilFloat, 0, c, nullptr);
       if (rank == 0) return coilRecv(R(), 99, coilFloat, n - 1, c, nullptr);
       return coilSuccess;
     },
     true},
};

struct Case {
  const Kind* kind;
  std::string transport;
  int nranks;
  Launch launch;
};

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(info.param.kind->name) + "_" + info.param.transport + "_" +
         std::to_string(info.param.nranks) +
         (info.param.launch == Launch::Threads ? "_threads" : "_procs");
}

class Mismatch : public ::testing::TestWithParam<Case> {};

TEST_P(Mismatch, EveryRankFailsPromptlyAndTheDetectorsNameIt) {
  const Case c = GetParam();
  ScopedEnv timeout("COIL_TIMEOUT_MS", "60000");
  runRanks({c.nranks, c.launch, c.transport}, [&](coilComm_t comm, int rank) {
    Buffers buffers;
    tls = &buffers;
    const bool odd = rank == c.nranks - 1;
    if (c.kind->oddSendsOnly && c.nranks > 2 && rank != 0 && !odd) return;
    // A good call first, so that every rank is set up. A rank still inside
    // it when a faster peer breaks over the mismatch fails it instead: a
    // broken communicator completes no collective.
    auto t0 = Clock::now();
    coilResult_t rc = allReduce(comm, 4);
    if (rc == coilSuccess) rc = c.kind->call(comm, rank, c.nranks, odd);
    std::string msg = coilGetLastError(comm);
    if (rc == coilSuccess && odd && c.kind->oddSendsOnly) {
      // A sender learns of the receiver's failure on its next call.
      rc = coilBarrier(comm, nullptr);
      msg = coilGetLastError(comm);
    }
    const double seconds = secondsSince(t0);
    EXPECT_NE(rc, coilSuccess) << "rank " << rank << " returned success from a mismatched call";
    EXPECT_NE(rc, coilTimeout) << "rank " << rank << ": " << msg;
    EXPECT_LT(seconds, kDetectSeconds) << "rank " << rank << ": " << msg;
    // Every message names a rank; a detector names the mismatch.
    EXPECT_NE(msg.find("rank"), std::string::npos) << msg;
    if (rc == coilInvalidUsage) {
      const bool named = msg.find("mismatch") != std::string::npos ||
                         msg.find("different") != std::string::npos ||
                         msg.find("where this rank") != std::string::npos ||
                         msg.find("disagree") != std::string::npos;
      EXPECT_TRUE(named) << msg;
    } else {
      EXPECT_EQ(rc, coilRemoteError) << msg;
    }
    tls = nullptr;
  });
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const Kind& k : kKinds)
    for (const std::string& transport : testedTransports())
      for (int n : {2, 3})
        for (Launch launch : {Launch::Threads, Launch::Processes})
          out.push_back({&k, transport, n, launch});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Kinds, Mismatch, ::testing::ValuesIn(cases()), caseName);

}  // namespace
}  // namespace coil::test
