// Every collective against an independent reference: threads and processes,
// shm and tcp, rank counts 1..8 with odd ones, every root, awkward counts,
// in-place and out-of-place, and each algorithm forced in turn (COIL_ALGO;
// "oneshot" forces the all-reduce's and, where no window is shared, the
// rooted one-shot of broadcast, reduce, gather and scatter).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "harness/reference.h"
#include "harness/run_ranks.h"

namespace coil::test {
namespace {

struct Setup {
  RankSetup ranks;
  std::string algo;  // COIL_ALGO for the run
};

std::string name(const ::testing::TestParamInfo<Setup>& info) {
  std::string a = info.param.algo.empty() ? "model" : info.param.algo;
  for (char& ch : a)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return paramName(info.param.ranks) + "_" + a;
}

// A distinct, exactly representable value per (rank, index).
int32_t tagValue(int rank, size_t i) { return static_cast<int32_t>(rank * 100003 + i % 99991); }

const size_t kCounts[] = {0, 1, 7, 1009, 70001};

void expectOk(coilResult_t rc, coilComm_t comm) {
  ASSERT_EQ(rc, coilSuccess) << coilGetLastError(comm);
}

// All-to-all: block p of my input (*send) goes to rank p, tagged with (me, p).
void checkAllToAll(coilComm_t comm, int rank, int n, size_t count, std::vector<int32_t>* send) {
  send->assign(count * n, 0);
  std::vector<int32_t> recv(count * n, -1);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i) (*send)[p * count + i] = tagValue(rank, p * count + i);
  expectOk(coilAlltoAll(send->data(), recv.data(), count, coilInt32, comm, nullptr), comm);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(recv[p * count + i], tagValue(p, rank * count + i)) << "from rank " << p;
}

class Collectives : public ::testing::TestWithParam<Setup> {
 protected:
  void run(const std::function<void(coilComm_t, int, int)>& body) {
    ScopedEnv algo("COIL_ALGO", GetParam().algo);
    runRanks(GetParam().ranks, [&](coilComm_t comm, int rank) { body(comm, rank, GetParam().ranks.nranks); });
  }
};

TEST_P(Collectives, AllReduceWithForcedAlgorithm) {
  run([](coilComm_t comm, int rank, int n) {
    for (coilDataType_t t : {coilFloat32, coilBfloat16, coilInt64})
      for (coilRedOp_t op : {coilSum, coilAvg, coilMax, coilBxor})
        for (size_t count : kCounts)
          for (bool inPlace : {false, true}) {
            if (!opTakesType(op, t)) continue;  // a float bxor: the checks' test refuses it
            SCOPED_TRACE(::testing::Message() << nameOf(t) << " " << nameOf(op) << " " << count);
            auto in = makeInput(t, op, rank, n, count);
            auto want = makeExpected(t, op, n, count);
            std::vector<uint8_t> out(in.size());
            void* dst = inPlace ? in.data() : out.data();
            expectOk(coilAllReduce(in.data(), dst, count, t, op, comm, nullptr), comm);
            ASSERT_EQ(firstMismatch(t, dst, want.data(), count), SIZE_MAX);
          }
  });
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  run([](coilComm_t comm, int rank, int n) {
    for (int root = 0; root < n; ++root)
      for (size_t count : kCounts)
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "root " << root << " count " << count);
          std::vector<int32_t> send(count), recv(count, -1);
          for (size_t i = 0; i < count; ++i) send[i] = tagValue(rank, i);
          int32_t* dst = inPlace ? send.data() : recv.data();
          expectOk(coilBroadcast(send.data(), dst, count, coilInt32, root, comm, nullptr), comm);
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(dst[i], tagValue(root, i)) << i;
        }
  });
}

TEST_P(Collectives, ReduceToEveryRoot) {
  run([](coilComm_t comm, int rank, int n) {
    for (int root = 0; root < n; ++root)
      for (coilRedOp_t op : {coilSum, coilMin, coilAvg, coilBor})
        for (size_t count : {size_t{0}, size_t{1}, size_t{1009}}) {
          SCOPED_TRACE(::testing::Message() << "root " << root << " " << nameOf(op));
          const coilDataType_t t = isBitwiseOp(op) ? coilUint64 : coilFloat32;
          auto in = makeInput(t, op, rank, n, count);
          auto want = makeExpected(t, op, n, count);
          std::vector<uint8_t> out(in.size(), 0);
          expectOk(coilReduce(in.data(), rank == root ? out.data() : nullptr, count, t, op, root,
                              comm, nullptr),
                   comm);
          if (rank == root) {
            ASSERT_EQ(firstMismatch(t, out.data(), want.data(), count), SIZE_MAX);
          }
        }
  });
}

TEST_P(Collectives, AllGatherAndReduceScatter) {
  run([](coilComm_t comm, int rank, int n) {
    for (size_t count : kCounts)
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "count " << count << (inPlace ? " in-place" : ""));
        // All-gather: block b of the result is rank b's data.
        std::vector<int32_t> all(count * n, -1), mine(count);
        for (size_t i = 0; i < count; ++i) mine[i] = tagValue(rank, i);
        const int32_t* send = mine.data();
        if (inPlace) {
          std::copy(mine.begin(), mine.end(), all.begin() + rank * count);
          send = all.data() + rank * count;
        }
        expectOk(coilAllGather(send, all.data(), count, coilInt32, comm, nullptr), comm);
        for (int b = 0; b < n; ++b)
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(all[b * count + i], tagValue(b, i));

        // Reduce-scatter: rank r gets the reduction of block r; element index is global.
        for (coilRedOp_t op : {coilSum, coilBand}) {
          SCOPED_TRACE(nameOf(op));
          auto in = makeInput(coilInt32, op, rank, n, count * n);
          auto want = makeExpected(coilInt32, op, n, count * n);
          std::vector<uint8_t> out(count * 4 + 1);
          uint8_t* dst = inPlace ? in.data() + rank * count * 4 : out.data();
          expectOk(coilReduceScatter(in.data(), dst, count, coilInt32, op, comm, nullptr), comm);
          ASSERT_EQ(firstMismatch(coilInt32, dst, want.data() + rank * count * 4, count), SIZE_MAX);
        }
      }
  });
}

TEST_P(Collectives, AllToAllGatherScatter) {
  run([](coilComm_t comm, int rank, int n) {
    for (size_t count : kCounts) {
      SCOPED_TRACE(::testing::Message() << "count " << count);
      std::vector<int32_t> send;
      checkAllToAll(comm, rank, n, count, &send);
      if (::testing::Test::HasFatalFailure()) return;

      for (int root = 0; root < n; ++root) {
        std::vector<int32_t> mine(count), gathered(count * n, -1);
        for (size_t i = 0; i < count; ++i) mine[i] = tagValue(rank, i);
        expectOk(coilGather(mine.data(), rank == root ? gathered.data() : nullptr, count,
                            coilInt32, root, comm, nullptr),
                 comm);
        if (rank == root) {
          for (int b = 0; b < n; ++b)
            for (size_t i = 0; i < count; ++i) ASSERT_EQ(gathered[b * count + i], tagValue(b, i));
        }
        std::vector<int32_t> part(count, -1);
        expectOk(coilScatter(rank == root ? send.data() : nullptr, part.data(), count, coilInt32,
                             root, comm, nullptr),
                 comm);
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(part[i], tagValue(root, rank * count + i));
      }
    }
  });
}

// Blocks of more than one piece of the caller-driven paths (1 MiB on tcp)
// and of more than one FIFO chunk, ending ragged: every primitive of every
// program cuts its range and stays in step with its peers. Up to 3 ranks
// (the all-gather of 8 would move 10 MiB a call for no new case).
TEST_P(Collectives, BlocksOfSeveralPiecesEndingRagged) {
  run([](coilComm_t comm, int rank, int n) {
    if (n > 3) return;
    const size_t count = 300007;  // 1.2 MiB of int32
    const int root = n - 1;
    std::vector<int32_t> mine(count), all(count * n, -1), one(count, -1);
    for (size_t i = 0; i < count; ++i) mine[i] = tagValue(rank, i);
    expectOk(coilBroadcast(mine.data(), one.data(), count, coilInt32, root, comm, nullptr), comm);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(one[i], tagValue(root, i)) << i;
    expectOk(coilAllGather(mine.data(), all.data(), count, coilInt32, comm, nullptr), comm);
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(all[b * count + i], tagValue(b, i)) << b;

    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(inPlace ? "in place" : "out of place");
      auto in = makeInput(coilInt32, coilSum, rank, n, count * n);
      auto want = makeExpected(coilInt32, coilSum, n, count * n);
      std::vector<uint8_t> out(count * 4);
      uint8_t* dst = inPlace ? in.data() + rank * count * 4 : out.data();
      expectOk(coilReduceScatter(in.data(), dst, count, coilInt32, coilSum, comm, nullptr), comm);
      ASSERT_EQ(firstMismatch(coilInt32, dst, want.data() + rank * count * 4, count), SIZE_MAX);

      auto x = makeInput(coilInt32, coilSum, rank, n, count);
      auto sum = makeExpected(coilInt32, coilSum, n, count);
      std::vector<uint8_t> reduced(count * 4);
      uint8_t* at = inPlace ? x.data() : reduced.data();
      expectOk(coilReduce(x.data(), rank == root ? at : nullptr, count, coilInt32, coilSum, root,
                          comm, nullptr),
               comm);
      if (rank == root) {
        ASSERT_EQ(firstMismatch(coilInt32, at, sum.data(), count), SIZE_MAX);
      }
    }

    std::vector<int32_t> send;
    checkAllToAll(comm, rank, n, count, &send);
  });
}

TEST_P(Collectives, SendRecvRingInAGroupInReverseOrder) {
  // Every rank receives before it sends: without a group this deadlocks
  // (each waits for its left neighbour); in a group it must complete.
  run([](coilComm_t comm, int rank, int n) {
    for (size_t count : {size_t{1}, size_t{300001}}) {
      std::vector<int32_t> out(count), in(count, -1);
      for (size_t i = 0; i < count; ++i) out[i] = tagValue(rank, i);
      const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
      expectOk(coilGroupStart(), comm);
      expectOk(coilRecv(in.data(), count, coilInt32, prev, comm, nullptr), comm);
      expectOk(coilSend(out.data(), count, coilInt32, next, comm, nullptr), comm);
      expectOk(coilGroupEnd(), comm);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], tagValue(prev, i));
    }
    expectOk(coilBarrier(comm, nullptr), comm);
  });
}

TEST_P(Collectives, TwoSendsAndTwoRecvsPerPeerInAGroup) {
  // torch's batch_isend_irecv of a bidirectional ring exchange: each rank
  // sends to both neighbours and receives from both, in one group. With 2
  // ranks (and 1) prev == next, so one peer gets two sends and two receives
  // in a single batch: they must match in the order they were issued, even
  // when the messages span many slices and differ in length.
  run([](coilComm_t comm, int rank, int n) {
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    for (auto [toNext, toPrev] : {std::pair<size_t, size_t>{1, 7}, {300001, 70001}, {70001, 0}}) {
      std::vector<int32_t> outNext(toNext), outPrev(toPrev);
      for (size_t i = 0; i < toNext; ++i) outNext[i] = tagValue(rank, i);
      for (size_t i = 0; i < toPrev; ++i) outPrev[i] = -tagValue(rank, i);
      // prev sent us its "to next" message; next sent us its "to prev" one.
      std::vector<int32_t> fromPrev(toNext, 1), fromNext(toPrev, 1);
      expectOk(coilGroupStart(), comm);
      expectOk(coilSend(outNext.data(), toNext, coilInt32, next, comm, nullptr), comm);
      expectOk(coilSend(outPrev.data(), toPrev, coilInt32, prev, comm, nullptr), comm);
      expectOk(coilRecv(fromPrev.data(), toNext, coilInt32, prev, comm, nullptr), comm);
      expectOk(coilRecv(fromNext.data(), toPrev, coilInt32, next, comm, nullptr), comm);
      expectOk(coilGroupEnd(), comm);
      for (size_t i = 0; i < toNext; ++i) ASSERT_EQ(fromPrev[i], tagValue(prev, i)) << i;
      for (size_t i = 0; i < toPrev; ++i) ASSERT_EQ(fromNext[i], -tagValue(next, i)) << i;
    }
    expectOk(coilBarrier(comm, nullptr), comm);
  });
}

TEST_P(Collectives, AnEmptyMessageKeepsTheOrderOfTheOnesAroundIt) {
  // Three messages to the next rank in one group, the middle one empty:
  // the third must wait for the first as if the empty one were not there
  // (found by random_program_test: the third went into the FIFO beside the
  // first, and the receiver took a slice of one for the other).
  run([](coilComm_t comm, int rank, int n) {
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    const size_t first = 262139, third = 70001;
    std::vector<int32_t> outFirst(first), outThird(third), inFirst(first), inThird(third);
    for (size_t i = 0; i < first; ++i) outFirst[i] = tagValue(rank, i);
    for (size_t i = 0; i < third; ++i) outThird[i] = -tagValue(rank, i);
    for (int round = 0; round < 5; ++round) {
      std::fill(inFirst.begin(), inFirst.end(), 0);
      std::fill(inThird.begin(), inThird.end(), 0);
      expectOk(coilGroupStart(), comm);
      expectOk(coilSend(outFirst.data(), first, coilInt32, next, comm, nullptr), comm);
      expectOk(coilSend(nullptr, 0, coilInt32, next, comm, nullptr), comm);  // as NCCL allows
      expectOk(coilSend(outThird.data(), third, coilInt32, next, comm, nullptr), comm);
      expectOk(coilRecv(inFirst.data(), first, coilInt32, prev, comm, nullptr), comm);
      expectOk(coilRecv(nullptr, 0, coilInt32, prev, comm, nullptr), comm);
      expectOk(coilRecv(inThird.data(), third, coilInt32, prev, comm, nullptr), comm);
      expectOk(coilGroupEnd(), comm);
      for (size_t i = 0; i < first; ++i) ASSERT_EQ(inFirst[i], tagValue(prev, i)) << i;
      for (size_t i = 0; i < third; ++i) ASSERT_EQ(inThird[i], -tagValue(prev, i)) << i;
    }
  });
}

TEST_P(Collectives, PreMulSumAndFusedGroupOfAllReduces) {
  run([](coilComm_t comm, int rank, int n) {
    float scalar = 0.5f;
    coilRedOp_t half;
    expectOk(coilRedOpCreatePreMulSum(&half, &scalar, coilFloat32, coilScalarHostImmediate, comm), comm);
    std::vector<float> a(101), b(101), c(101);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(2 * (rank + i));
    expectOk(coilGroupStart(), comm);
    expectOk(coilAllReduce(a.data(), b.data(), a.size(), coilFloat32, half, comm, nullptr), comm);
    expectOk(coilAllReduce(a.data(), c.data(), a.size(), coilFloat32, coilSum, comm, nullptr), comm);
    expectOk(coilGroupEnd(), comm);
    for (size_t i = 0; i < a.size(); ++i) {
      float sum = static_cast<float>(2 * (n * i) + n * (n - 1));
      ASSERT_EQ(c[i], sum);
      ASSERT_EQ(b[i], sum / 2);
    }
    expectOk(coilRedOpDestroy(half, comm), comm);
    EXPECT_EQ(coilAllReduce(a.data(), b.data(), 1, coilFloat32, half, comm, nullptr), coilInvalidArgument);
  });
}

TEST_P(Collectives, SplitIntoOddAndEvenAndUseBothAtOnce) {
  run([](coilComm_t comm, int rank, int n) {
    coilComm_t child = nullptr;
    expectOk(coilCommSplit(comm, rank % 2, -rank, &child, nullptr), comm);
    ASSERT_NE(child, nullptr);
    int childRank = -1, childSize = 0;
    coilCommUserRank(child, &childRank);
    coilCommCount(child, &childSize);
    EXPECT_EQ(childSize, (n + 1 - rank % 2) / 2);
    // key = -rank: higher parent ranks come first.
    EXPECT_EQ(childRank, childSize - 1 - rank / 2);
    int64_t v = rank, sum = 0;
    expectOk(coilAllReduce(&v, &sum, 1, coilInt64, coilSum, child, nullptr), child);
    int64_t want = 0;
    for (int r = rank % 2; r < n; r += 2) want += r;
    EXPECT_EQ(sum, want);
    expectOk(coilCommDestroy(child), nullptr);
    // NOCOLOR: no communicator.
    coilComm_t none = reinterpret_cast<coilComm_t>(1);
    expectOk(coilCommSplit(comm, rank == 0 ? COIL_SPLIT_NOCOLOR : 0, 0, &none, nullptr), comm);
    if (rank == 0) EXPECT_EQ(none, nullptr);
    else {
      ASSERT_NE(none, nullptr);
      int size = 0;
      coilCommCount(none, &size);
      EXPECT_EQ(size, n - 1);
      coilCommDestroy(none);
    }
  });
}

std::vector<Setup> setups(Launch launch) {
  std::vector<Setup> out;
  for (const std::string& transport : testedTransports(launch)) {
    for (int n : {1, 2, 3, 5, 8}) {
      // Two hosts: 3 and 5 ranks (2 + 1, 2 + 3) join both kinds of links.
      if (!joinsBothKinds(transport, n) || (transport == kTwoHosts && n > 5) ||
          !rankCountTested(n))
        continue;
      for (const char* algo : {"", "allreduce:tree,broadcast:tree,reduce:tree",
                               "allreduce:ring,broadcast:ring,reduce:chain",
                               "oneshot", "allreduce:slice"}) {
        Setup s;
        s.ranks.nranks = n;
        s.ranks.launch = launch;
        s.ranks.transport = transport;
        s.algo = algo;
        out.push_back(s);
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Threads, Collectives, ::testing::ValuesIn(setups(Launch::Threads)), name);
INSTANTIATE_TEST_SUITE_P(Procs, Collectives, ::testing::ValuesIn(setups(Launch::Processes)), name);

}  // namespace
}  // namespace coil::test
