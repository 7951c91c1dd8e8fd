// All-reduce against the independent reference (harness/reference.h), the
// same body over every transport, as threads and as processes, for awkward
// rank counts and sizes.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness/reference.h"
#include "harness/run_ranks.h"

namespace coil::test {
namespace {

constexpr coilDataType_t kTypes[] = {coilInt8,    coilUint8,   coilInt32,  coilUint32,
                                     coilInt64,   coilUint64,  coilFloat16, coilFloat32,
                                     coilFloat64, coilBfloat16};
constexpr coilRedOp_t kOps[] = {coilSum, coilProd, coilMax, coilMin,
                                coilAvg, coilBand, coilBor, coilBxor};

// A bitwise op on a float type: refused on every rank before anything moves,
// with a message that names both, and the communicator still works after.
void checkRefused(coilComm_t comm, coilDataType_t t, coilRedOp_t op) {
  SCOPED_TRACE(::testing::Message() << nameOf(t) << " " << nameOf(op) << " (refused)");
  std::vector<uint8_t> buf(5 * sizeOf(t), 0);
  ASSERT_EQ(coilAllReduce(buf.data(), buf.data(), 5, t, op, comm, nullptr), coilInvalidArgument);
  const std::string why = coilGetLastError(comm);
  EXPECT_NE(why.find(std::string("reduction op ") + nameOf(op) +
                     " takes integer datatypes only, not " + nameOf(t)),
            std::string::npos)
      << why;
}

// One all-reduce, out-of-place or in-place, checked bit for bit.
void checkAllReduce(coilComm_t comm, int rank, int n, coilDataType_t t, coilRedOp_t op,
                    size_t count, bool inPlace, size_t misalign = 0) {
  SCOPED_TRACE(::testing::Message() << nameOf(t) << " " << nameOf(op) << " count=" << count
                                    << (inPlace ? " in-place" : " out-of-place")
                                    << " misalign=" << misalign << " rank=" << rank);
  const size_t bytes = count * sizeOf(t);
  std::vector<uint8_t> input = makeInput(t, op, rank, n, count);
  std::vector<uint8_t> want = makeExpected(t, op, n, count);
  // Extra room so the buffers can start at an odd address.
  std::vector<uint8_t> sendStore(bytes + 16), recvStore(bytes + 16, 0xA5);
  uint8_t* send = sendStore.data() + misalign;
  uint8_t* recv = inPlace ? send : recvStore.data() + misalign;
  std::memcpy(send, input.data(), bytes);
  ASSERT_EQ(coilAllReduce(send, recv, count, t, op, comm, nullptr), coilSuccess)
      << coilGetLastError(comm);
  size_t bad = firstMismatch(t, recv, want.data(), count);
  ASSERT_EQ(bad, SIZE_MAX) << "first wrong element " << bad;
  if (!inPlace) {
    EXPECT_EQ(std::memcmp(send, input.data(), bytes), 0) << "sendbuff was modified";
  }
}

// A rank setup, the all-reduce algorithm COIL_ALGO forces ("" = the model's
// choice), COIL_SHM_WINDOW ("" = the default, a window on one host), and
// COIL_TUNE ("" = none).
struct AlgoSetup {
  RankSetup ranks;
  std::string algo;
  std::string window;
  std::string tune;
};

class AllReduce : public ::testing::TestWithParam<AlgoSetup> {
 protected:
  ScopedEnv algo_{"COIL_ALGO", GetParam().algo};
  ScopedEnv window_{"COIL_SHM_WINDOW", GetParam().window};
  ScopedEnv tune_{"COIL_TUNE", GetParam().tune};
};

TEST_P(AllReduce, EveryTypeOpAndAwkwardCount) {
  const RankSetup setup = GetParam().ranks;
  runRanks(setup, [&](coilComm_t comm, int rank) {
    const int n = setup.nranks;
    const size_t counts[] = {0, 1, static_cast<size_t>(n > 1 ? n - 1 : 2), 13, 1009};
    for (coilDataType_t t : kTypes)
      for (coilRedOp_t op : kOps)
        for (size_t count : counts)
          for (bool inPlace : {false, true}) {
            if (!opTakesType(op, t)) {
              if (count == 0 && !inPlace) checkRefused(comm, t, op);
              continue;
            }
            checkAllReduce(comm, rank, n, t, op, count, inPlace);
            if (::testing::Test::HasFatalFailure()) return;
          }
  });
}

TEST_P(AllReduce, LargeAndMisaligned) {
  const RankSetup setup = GetParam().ranks;
  runRanks(setup, [&](coilComm_t comm, int rank) {
    // 1 MiB + 3 elements spans several ring rounds and ends with a ragged round.
    const size_t big = (1u << 20) + 3;
    checkAllReduce(comm, rank, setup.nranks, coilFloat32, coilSum, big, false, 1);
    checkAllReduce(comm, rank, setup.nranks, coilBfloat16, coilAvg, big, true, 3);
    checkAllReduce(comm, rank, setup.nranks, coilInt64, coilMax, 100003, false, 5);
  });
}

TEST_P(AllReduce, BitwiseIdenticalAcrossRanksAndRuns) {
  // Non-integer data: rounding happens, so only determinism can be checked —
  // every rank, and a second run, must produce exactly the same bits.
  const RankSetup setup = GetParam().ranks;
  runRanks(setup, [&](coilComm_t comm, int rank) {
    const size_t count = 300007;
    std::vector<float> in(count), out1(count), out2(count), all(count * setup.nranks);
    for (size_t i = 0; i < count; ++i)
      in[i] = 1.0f / static_cast<float>(1 + (i * 31 + rank * 17) % 1000) + rank * 1e-3f;
    ASSERT_EQ(coilAllReduce(in.data(), out1.data(), count, coilFloat, coilSum, comm, nullptr),
              coilSuccess);
    ASSERT_EQ(coilAllReduce(in.data(), out2.data(), count, coilFloat, coilSum, comm, nullptr),
              coilSuccess);
    EXPECT_EQ(std::memcmp(out1.data(), out2.data(), count * 4), 0) << "not deterministic";
    // Gather every rank's result with a max over the bit patterns reinterpreted as
    // int32: if all ranks agree, max == min == own bits.
    std::vector<int32_t> bits(count), mx(count), mn(count);
    std::memcpy(bits.data(), out1.data(), count * 4);
    ASSERT_EQ(coilAllReduce(bits.data(), mx.data(), count, coilInt32, coilMax, comm, nullptr),
              coilSuccess);
    ASSERT_EQ(coilAllReduce(bits.data(), mn.data(), count, coilInt32, coilMin, comm, nullptr),
              coilSuccess);
    EXPECT_EQ(mx, bits);
    EXPECT_EQ(mn, bits);
  });
}

AlgoSetup algoSetup(int n, Launch launch, const std::string& transport, const char* algo,
                    const char* window = "") {
  AlgoSetup s;
  s.ranks.nranks = n;
  s.ranks.launch = launch;
  s.ranks.transport = transport;
  s.algo = algo;
  s.window = window;
  return s;
}

std::vector<AlgoSetup> setups(Launch launch) {
  std::vector<AlgoSetup> out;
  for (const std::string& transport : testedTransports(launch))
    for (int n : {1, 2, 3, 4, 5, 7, 8})
      if (joinsBothKinds(transport, n) && rankCountTested(n))
        out.push_back(algoSetup(n, launch, transport, ""));
  // Each direct algorithm forced: one-shot and slice through the shared
  // window (shm), one-shot through tcp's caller-driven path, and through
  // the shm FIFOs' slots (the window off: as across hosts without a
  // caller-driven path). Messages the forced algorithm cannot take fall
  // back to the model's choice.
  for (int n : {2, 3, 4, 5, 7, 8}) {
    if (!rankCountTested(n)) continue;
    out.push_back(algoSetup(n, launch, "shm", "allreduce:oneshot"));
    out.push_back(algoSetup(n, launch, "shm", "allreduce:slice"));
    out.push_back(algoSetup(n, launch, "tcp", "allreduce:oneshot"));
    out.push_back(algoSetup(n, launch, "shm", "allreduce:oneshot", "0"));
  }
  // tcp's proxy, where caller=0 keeps the programs (and, across hosts, the
  // one-shot): every tcp link through the FIFOs.
  for (int n : {3, 5}) {
    for (const char* algo : {"", "allreduce:ring", "allreduce:tree"}) {
      out.push_back(algoSetup(n, launch, "tcp", algo));
      out.back().tune = "tcp:caller=0";
      if (launch == Launch::Threads) continue;
      out.push_back(algoSetup(n, launch, kTwoHosts, algo));
      out.back().tune = "tcp:caller=0";
    }
  }
  return out;
}

std::string name(const ::testing::TestParamInfo<AlgoSetup>& info) {
  std::string a = info.param.algo.empty() ? "" : "_" + info.param.algo;
  for (char& ch : a)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return paramName(info.param.ranks) + a + (info.param.window == "0" ? "_nowindow" : "") +
         (info.param.tune.empty() ? "" : "_proxy");
}

INSTANTIATE_TEST_SUITE_P(Threads, AllReduce, ::testing::ValuesIn(setups(Launch::Threads)), name);
INSTANTIATE_TEST_SUITE_P(Procs, AllReduce, ::testing::ValuesIn(setups(Launch::Processes)), name);

}  // namespace
}  // namespace coil::test
