// fork() while coil's own threads hold its locks. The child of a threaded
// process inherits only the forking thread; any lock another thread held at
// that instant would stay locked forever in the child. Test harnesses,
// launchers and Python's multiprocessing all fork after coil has started
// threads (coilGetUniqueId starts the rendezvous root), so coil holds its
// process-wide locks across fork (core/fork_guard.h).
//
// Run with COIL_DEBUG=INFO COIL_DEBUG_SUBSYS=ALL (see tests/meson.build):
// every failed call then logs a line (COLL), so a busy thread holds the log
// lock most of the time.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "coil.h"
#include "harness/asan_allocator.h"

namespace {

// Where a hung child waits, on `fd` (the test's real stderr): its kernel
// wait channel and system call, and its stack when gdb is installed. A hang
// is rare (1 child in 300 once in CI, none in 3,300 locally), so the first
// one must say where it was.
void describeHungChild(pid_t pid, int fd) {
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string command =
      "echo 'hung child " + std::to_string(pid) + ": wchan' $(cat " + proc + "/wchan)" +
      " '; syscall' $(cat " + proc + "/syscall); command -v gdb >/dev/null && timeout 30 gdb -q"
      " -batch -p " + std::to_string(pid) + " -ex 'thread apply all bt' 2>&1 | grep -E '^#|^Thread'";
  const pid_t reporter = fork();
  if (reporter == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (reporter > 0) waitpid(reporter, &status, 0);
}

// Runs `child` in a forked child while `busy` runs on other threads of this
// process; returns how many of `forks` children failed to exit within 5 s.
int hungChildren(int forks, void (*busy)(std::atomic<bool>&), void (*child)()) {
  // Log lines go to /dev/null for the duration: only the locking matters.
  const int savedStderr = dup(2);
  const int devnull = open("/dev/null", O_WRONLY);
  dup2(devnull, 2);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back([&] { busy(stop); });
  int hung = 0;
  for (int i = 0; i < forks; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      child();
      _exit(0);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        describeHungChild(pid, savedStderr);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ++hung;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  stop = true;
  for (auto& t : threads) t.join();
  dup2(savedStderr, 2);
  close(savedStderr);
  close(devnull);
  return hung;
}

// A failed call logs its error (at INFO) under the log lock.
void failingCalls(std::atomic<bool>& stop) {
  int n = 0;
  while (!stop.load()) coilCommCount(nullptr, &n);
}

using coil::test::kAsanAllocator;

TEST(ForkSafety, AChildCanLogWhileParentThreadsWereLogging) {
  if (kAsanAllocator)
    GTEST_SKIP() << "the logging threads allocate, and this build's AddressSanitizer allocator "
                    "is not fork-safe; the release build runs this test";
  EXPECT_EQ(hungChildren(300, failingCalls, [] {
              int n = 0;
              coilCommCount(nullptr, &n);  // logs, so takes the log lock
            }),
            0);
}

coilComm_t gSolo = nullptr;

// Live-handle lookups take the handle registry's lock.
void handleLookups(std::atomic<bool>& stop) {
  int n = 0;
  while (!stop.load()) coilCommCount(gSolo, &n);
}

TEST(ForkSafety, AChildCanCreateACommunicatorWhileParentThreadsUsedOne) {
  // The child's init allocates a lot; under gcc 12's AddressSanitizer one
  // child in 200 hung inside the sanitizer's allocator in two CI runs of
  // 2026-11-25 (not reproduced in release builds, where this test runs).
  if (kAsanAllocator)
    GTEST_SKIP() << "this build's AddressSanitizer allocator is not fork-safe; the release "
                    "build runs this test";
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess);
  ASSERT_EQ(coilCommInitRank(&gSolo, 1, id, 0), coilSuccess) << coilGetLastError(nullptr);
  EXPECT_EQ(hungChildren(200, handleLookups, [] {
              coilUniqueId childId;
              coilComm_t comm = nullptr;
              if (coilGetUniqueId(&childId) != coilSuccess ||
                  coilCommInitRank(&comm, 1, childId, 0) != coilSuccess)
                _exit(3);
              float x = 1, y = 0;
              if (coilAllReduce(&x, &y, 1, coilFloat, coilSum, comm, nullptr) != coilSuccess || y != 1)
                _exit(4);
              coilCommDestroy(comm);
            }),
            0);
  EXPECT_EQ(coilCommDestroy(gSolo), coilSuccess);
}

}  // namespace
