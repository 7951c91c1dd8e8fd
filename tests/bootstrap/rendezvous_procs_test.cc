// Rendezvous with ranks as forked processes: the normal case, a fixed root
// hosted by rank 0, a rank killed with SIGKILL during an allGather, and an
// id whose root's process has exited.
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

// coilGetUniqueId's root listens before the id exists, so a refused
// connection means its process is gone (or the id is left from an earlier
// run, as under a torchrun restart). The rank must fail at once and say so,
// not retry until its deadline.
TEST(RendezvousProcesses, AnIdWhoseRootProcessExitedFailsAtOnce) {
  test::EnvGuard env(test::bootstrapVars());
  int idPipe[2];
  ASSERT_EQ(pipe(idPipe), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    coilUniqueId bytes = encodeUniqueId(startRoot(loopback(), kTimeoutMs));
    bool sent = write(idPipe[1], &bytes, sizeof bytes) == static_cast<ssize_t>(sizeof bytes);
    _exit(sent ? 0 : 1);  // the root's listener goes with the process
  }
  ::close(idPipe[1]);
  coilUniqueId bytes;
  ASSERT_EQ(read(idPipe[0], &bytes, sizeof bytes), static_cast<ssize_t>(sizeof bytes));
  ::close(idPipe[0]);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << statusText(st);
  const UniqueIdData id = decodeUniqueId(bytes);

  auto start = std::chrono::steady_clock::now();
  try {
    Bootstrap::create(id, 1, 2, Deadline::after(kTimeoutMs), nullptr);
    FAIL() << "joined a root whose process had exited";
  } catch (const Error& e) {
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(e.code(), coilRemoteError) << e.what();
    EXPECT_LT(took, 3.0) << e.what();
    EXPECT_NE(std::string(e.what()).find(id.root.toString()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("exited"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace coil
