// Rendezvous with ranks as forked processes: the normal case, a fixed root
// hosted by rank 0, and a rank killed with SIGKILL during an allGather.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "test_util.h"

namespace coil {
namespace {

using test::loopback;

constexpr int64_t kTimeoutMs = 15000;

// Child exit codes.
constexpr int kOk = 0;
constexpr int kWrongData = 10;
constexpr int kWrongError = 11;
constexpr int kTooSlow = 12;
constexpr int kNoError = 13;

int gatherAndCheck(const UniqueIdData& id, int rank, int nranks, size_t bytes) {
  auto boot = Bootstrap::create(id, rank, nranks, Deadline::after(kTimeoutMs), nullptr);
  std::vector<uint8_t> buf(bytes * static_cast<size_t>(nranks));
  test::fillOwnBlock(buf, rank, bytes);
  boot->allGather(buf.data(), bytes);
  if (test::firstWrongByte(buf, nranks, bytes) >= 0) return kWrongData;
  boot->barrier();
  return kOk;
}

std::string statusText(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "signal " + std::to_string(WTERMSIG(st));
  return "status " + std::to_string(st);
}

TEST(RendezvousProcesses, AllGatherAcrossProcesses) {
  test::EnvGuard env(test::bootstrapVars());
  auto status = test::runProcessesAroundRoot(
      4, kTimeoutMs, [](int r, const UniqueIdData& id) { return gatherAndCheck(id, r, 4, 1 << 20); });
  for (size_t r = 0; r < status.size(); ++r)
    EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == kOk)
        << "rank " << r << ": " << statusText(status[r]);
}

TEST(RendezvousProcesses, FixedRootHostedByRank0) {
  test::EnvGuard env(test::bootstrapVars());
  uint16_t port;
  {
    Socket probe = Socket::listen(loopback());
    port = probe.localAddress().port();
  }
  // Each process derives the same id on its own, as from COIL_COMM_ID.
  auto status = test::runProcesses(3, [&](int r) {
    UniqueIdData id = uniqueIdForFixedRoot(loopback(port), "procs-job");
    return gatherAndCheck(id, r, 3, 4096);
  });
  for (size_t r = 0; r < status.size(); ++r)
    EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == kOk)
        << "rank " << r << ": " << statusText(status[r]);
}

TEST(RendezvousProcesses, KilledRankFailsTheOthersPromptly) {
  test::EnvGuard env(test::bootstrapVars());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  constexpr int kVictim = 2;
  auto status = test::runProcessesAroundRoot(
      4, kTimeoutMs,
      [&](int r, const UniqueIdData& id) {
        ::close(ready[0]);
        auto boot = Bootstrap::create(id, r, 4, Deadline::after(kTimeoutMs), nullptr);
        if (r == kVictim) {
          char c = 1;
          if (write(ready[1], &c, 1) != 1) return 20;
          ::close(ready[1]);
          std::this_thread::sleep_for(std::chrono::seconds(30));  // until killed
          return 21;
        }
        ::close(ready[1]);
        boot->setDeadline(Deadline::after(20000));
        std::vector<uint8_t> buf(4 * (2 << 20));
        auto start = std::chrono::steady_clock::now();
        try {
          boot->allGather(buf.data(), 2 << 20);
        } catch (const Error& e) {
          double took =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (e.code() != coilRemoteError) {
            std::fprintf(stderr, "rank %d: %s\n", r, e.what());
            return kWrongError;
          }
          if (took > 3.0) return kTooSlow;
          return kOk;
        }
        return kNoError;
      },
      20,
      [&](const std::vector<pid_t>& pids) {
        ::close(ready[1]);
        pollfd p{ready[0], POLLIN, 0};
        char c = 0;
        bool victimReady = ::poll(&p, 1, 10000) == 1 && read(ready[0], &c, 1) == 1;
        ::close(ready[0]);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        if (victimReady) kill(pids[kVictim], SIGKILL);
      });
  ASSERT_TRUE(WIFSIGNALED(status[kVictim]) && WTERMSIG(status[kVictim]) == SIGKILL)
      << statusText(status[kVictim]);
  for (int r = 0; r < 4; ++r) {
    if (r == kVictim) continue;
    EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == kOk)
        << "rank " << r << ": " << statusText(status[r]);
  }
}

}  // namespace
}  // namespace coil
