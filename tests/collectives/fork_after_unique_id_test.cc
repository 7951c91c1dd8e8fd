// The most common way to start ranks by hand: a process calls
// coilGetUniqueId, then forks its ranks at once (test harnesses, examples,
// Python's multiprocessing with the fork start method).
//
// coilGetUniqueId starts the rendezvous root on a thread, and that thread's
// first steps run coil's one-time initialisations (the log settings, the
// variables table, ...) while the main thread forks. A lock held across
// fork() is covered by core/fork_guard.h, but a C++ function-local static
// is guarded by the compiler's own lock: a child forked while the root
// thread was inside such an initialisation inherits it "in progress" and
// waits for it forever, inside coilCommInitRank, with no deadline.
//
// Each round therefore needs a process in which coil has done nothing yet:
// this test's process never calls coil itself; every round forks a fresh
// "launcher" that gets an id and forks two ranks straight away. (Before
// the fix, one launcher in 30 to 300 hung.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "coil.h"
#include "harness/asan_allocator.h"
#include "harness/wait_or_kill.h"

namespace {

using Clock = std::chrono::steady_clock;
using coil::test::waitOrKill;

// A rank of two: init, one all-reduce, destroy.
[[noreturn]] void runRank(const coilUniqueId& id, int rank) {
  coilComm_t comm = nullptr;
  if (coilCommInitRank(&comm, 2, id, rank) != coilSuccess) _exit(3);
  float x = static_cast<float>(rank + 1), sum = 0;
  if (coilAllReduce(&x, &sum, 1, coilFloat, coilSum, comm, nullptr) != coilSuccess || sum != 3)
    _exit(4);
  coilCommDestroy(comm);
  _exit(0);
}

// The launcher: an id, then two ranks forked at once. Exits 0 when both
// ranks finished in time; 1 when one hung (its wait channel and system call
// are printed first: where it hung); 2 + its status when one failed.
[[noreturn]] void runLauncher() {
  coilUniqueId id;
  if (coilGetUniqueId(&id) != coilSuccess) _exit(2);
  pid_t ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = fork();
    if (ranks[r] == 0) runRank(id, r);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  int result = 0;
  for (pid_t pid : ranks) {
    const std::string proc = "/proc/" + std::to_string(pid);
    const std::string where = "echo 'hung rank " + std::to_string(pid) + ": wchan' $(cat " + proc +
                              "/wchan) '; syscall' $(cat " + proc + "/syscall) >&2";
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    if (Clock::now() >= deadline && kill(pid, 0) == 0) {
      if (std::system(where.c_str()) != 0) {}
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result = 1;
    } else if (result == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      result = 2 + (WIFEXITED(status) ? WEXITSTATUS(status) : 100);
    }
  }
  _exit(result);
}

TEST(ForkAfterUniqueId, RanksForkedAtOnceAfterTheIdAllStart) {
  if (coil::test::kAsanAllocator)
    GTEST_SKIP() << "this build's AddressSanitizer allocator is not fork-safe with a thread "
                    "allocating; the release build runs this test";
  constexpr int kRounds = 300;
  int hung = 0, failed = 0;
  for (int round = 0; round < kRounds; ++round) {
    const pid_t launcher = fork();
    ASSERT_GE(launcher, 0);
    if (launcher == 0) runLauncher();
    const int status = waitOrKill(launcher, Clock::now() + std::chrono::seconds(60));
    if (status == 1 || status < 0) ++hung;
    else if (status != 0) ++failed;
  }
  EXPECT_EQ(hung, 0) << hung << " of " << kRounds << " launchers had a rank that never finished";
  EXPECT_EQ(failed, 0) << failed << " of " << kRounds << " launchers had a rank that failed";
}

}  // namespace
