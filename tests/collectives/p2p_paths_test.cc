// Point-to-point: the path each message takes, and what a peer that dies
// does to a rank waiting for it.
//
// Over tcp, a message moves on the caller-driven path (the express
// socket, in pieces) unless COIL_TUNE's caller=0 keeps it on the FIFOs;
// each rank's COLL log says which for every batch. The values are checked
// either way, at sizes that end a piece raggedly. A rank that dies while
// its peer receives from it (alone, or in a group beside a send too large
// for the socket buffers) fails that peer with coilRemoteError in seconds,
// over every tested transport; so does a revoke from another thread.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "harness/run_ranks.h"

namespace coil::test {
namespace {

using Clock = std::chrono::steady_clock;

int32_t valueOf(int from, size_t count, size_t i) {
  return static_cast<int32_t>((i * 7 + count * 13 + static_cast<size_t>(from) * 1000003) % 2147483629);
}

struct PathCase {
  const char* tune;         // COIL_TUNE; "" for none
  bool onCallerPaths;       // the log must say every message took them
};

class TcpPaths : public ::testing::TestWithParam<PathCase> {};

TEST_P(TcpPaths, MessagesArriveWholeOnThePathTheLogNames) {
  const PathCase c = GetParam();
  char dir[] = "/tmp/coil-p2p-paths-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  // 0, 1, a prime, just over one 1 MiB piece, and 3 MiB and a bit: pieces
  // of 1 MiB (or the 64 KiB of caller=65536) with a ragged last one.
  const std::vector<size_t> counts{0, 1, 4099, 262147, 786433};
  {
    ScopedEnv tune("COIL_TUNE", c.tune);
    ScopedEnv level("COIL_DEBUG", "INFO");
    ScopedEnv subsys("COIL_DEBUG_SUBSYS", "COLL");
    ScopedEnv file("COIL_DEBUG_FILE", std::string(dir) + "/rank-%p.log");
    runRanksRaw({2, Launch::Processes, "tcp"}, [&](const coilUniqueId& id, int rank) {
      coilResetDebugInit();  // this process's log settings, as set above
      coilComm_t comm = initWithTimeout(id, 2, rank, 60000);
      ASSERT_NE(comm, nullptr);
      const int peer = 1 - rank;
      for (size_t count : counts) {
        std::vector<int32_t> out(count), in(count + 1, -1);
        for (size_t i = 0; i < count; ++i) out[i] = valueOf(rank, count, i);
        // Both ranks post the receive first, in one group.
        ASSERT_EQ(coilGroupStart(), coilSuccess);
        ASSERT_EQ(coilRecv(in.data(), count, coilInt32, peer, comm, nullptr), coilSuccess);
        ASSERT_EQ(coilSend(out.data(), count, coilInt32, peer, comm, nullptr), coilSuccess);
        ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(comm);
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], valueOf(peer, count, i)) << count << " at " << i;
        ASSERT_EQ(in[count], -1) << "a receive of " << count << " wrote past its end";
        // Without a group: rank 0 sends first, rank 1 receives first.
        std::fill(in.begin(), in.end(), -1);
        if (rank == 0) {
          ASSERT_EQ(coilSend(out.data(), count, coilInt32, peer, comm, nullptr), coilSuccess);
          ASSERT_EQ(coilRecv(in.data(), count, coilInt32, peer, comm, nullptr), coilSuccess);
        } else {
          ASSERT_EQ(coilRecv(in.data(), count, coilInt32, peer, comm, nullptr), coilSuccess);
          ASSERT_EQ(coilSend(out.data(), count, coilInt32, peer, comm, nullptr), coilSuccess);
        }
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], valueOf(peer, count, i)) << count << " at " << i;
      }
      ASSERT_EQ(coilCommDestroy(comm), coilSuccess);
    });
  }
  // The parent read the settings too (it made the unique id): back to the
  // environment without them for the tests after this one.
  coilResetDebugInit();
  // Every batch of both ranks: 2 operations in a group, 1 alone.
  int batches = 0, onCaller = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream log(entry.path());
    std::string line;
    while (std::getline(log, line)) {
      const size_t at = line.find("point-to-point: ");
      if (at == std::string::npos) continue;
      std::istringstream fields(line.substr(at + 16));  // "2 operation(s), 2 on the ..."
      int ops = 0, caller = 0;
      std::string word;
      fields >> ops >> word >> caller;
      ++batches;
      if (caller == ops) ++onCaller;
      else EXPECT_EQ(caller, 0) << "a batch partly on the caller-driven paths: " << line;
    }
  }
  std::filesystem::remove_all(dir);
  EXPECT_EQ(batches, static_cast<int>(2 * 3 * counts.size())) << "one log line per batch per rank";
  EXPECT_EQ(onCaller, c.onCallerPaths ? batches : 0)
      << (c.onCallerPaths ? "every message should take tcp's express sockets"
                          : "caller=0 keeps every message on the FIFOs");
}

INSTANTIATE_TEST_SUITE_P(Tune, TcpPaths,
                         ::testing::Values(PathCase{"", true}, PathCase{"tcp:caller=65536", true},
                                           PathCase{"tcp:caller=0", false}),
                         [](const auto& info) {
                           return std::string(info.param.tune[0] == '\0' ? "default"
                                              : info.param.onCallerPaths ? "smallPieces"
                                                                         : "callerOff");
                         });

// Rank 0 dies (no goodbye) while rank 1 waits to receive from it: alone, or
// in a group beside a 16 MiB send to it that the socket buffers cannot hold.
class PeerDiesDuringAReceive : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(PeerDiesDuringAReceive, TheReceiverGetsRemoteErrorPromptly) {
  const std::string transport = std::get<0>(GetParam());
  const bool withSend = std::get<1>(GetParam());  // (a lambda below uses it: no structured binding)
  runRanksRaw({2, Launch::Processes, transport}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, 2, rank, 60000);
    ASSERT_NE(comm, nullptr);
    ASSERT_EQ(coilBarrier(comm, nullptr), coilSuccess);  // both connected
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      _exit(0);  // like a crash: no destroy, no goodbye
    }
    std::vector<float> in(1000), out(size_t{4} << 20, 1.0f);
    const auto t0 = Clock::now();
    coilResult_t rc;
    if (withSend) {
      ASSERT_EQ(coilGroupStart(), coilSuccess);
      coilSend(out.data(), out.size(), coilFloat, 0, comm, nullptr);
      coilRecv(in.data(), in.size(), coilFloat, 0, comm, nullptr);
      rc = coilGroupEnd();
    } else {
      rc = coilRecv(in.data(), in.size(), coilFloat, 0, comm, nullptr);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::string msg = coilGetLastError(comm);
    EXPECT_EQ(rc, coilRemoteError) << msg;
    EXPECT_LT(seconds, 10.0) << msg;
    EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

// A receive from a peer that never sends, revoked by another thread after
// 200 ms: it returns within 100 ms, with an error (the torch backend stops
// its receiving threads this way, p2p_links.h); the peer then fails fast.
class RevokeDuringAReceive : public ::testing::TestWithParam<std::string> {};

TEST_P(RevokeDuringAReceive, ReturnsWithin100ms) {
  std::atomic<bool> revoked{false};
  runRanksRaw({2, Launch::Threads, GetParam()}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, 2, rank, 60000);
    ASSERT_NE(comm, nullptr);
    std::vector<float> in(1000);
    if (rank == 0) {
      const InterruptedCall c = callInterruptedAfter(
          200,
          [&] {
            EXPECT_EQ(coilCommRevoke(comm), coilSuccess);
            revoked = true;
          },
          [&] { return coilRecv(in.data(), in.size(), coilFloat, 1, comm, nullptr); });
      EXPECT_NE(c.result, coilSuccess);
      EXPECT_LT(c.msAfterInterrupt, 100.0) << "ms from revoke to return";
    } else {
      while (!revoked) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const auto t0 = Clock::now();
      const coilResult_t rc = coilRecv(in.data(), in.size(), coilFloat, 0, comm, nullptr);
      EXPECT_EQ(rc, coilRemoteError) << coilGetLastError(comm);
      EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
    }
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, RevokeDuringAReceive, ::testing::ValuesIn(testedTransports()),
                         [](const auto& info) { return info.param; });

std::vector<std::tuple<std::string, bool>> deathCases() {
  std::vector<std::tuple<std::string, bool>> out;
  for (const std::string& t : testedTransports())
    for (bool withSend : {false, true}) out.emplace_back(t, withSend);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerDiesDuringAReceive, ::testing::ValuesIn(deathCases()),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) ? "_besideASend" : "_alone");
                         });

}  // namespace
}  // namespace coil::test
