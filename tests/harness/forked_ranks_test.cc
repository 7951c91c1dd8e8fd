// The launch mechanics on their own: handover, exit status in words,
// the deadline, a child that dies before the handover, and forking beside
// a thread that runs (quiet_threads.h).
#include "launch/forked_ranks.h"

#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "launch/quiet_threads.h"

#include <gtest/gtest.h>

namespace coil {
namespace {

using namespace std::chrono_literals;

TEST(ForkedRanks, ChildrenGetTheSharedBytesAndTheirRanks) {
  ForkedRanks forked(1, 4);
  if (forked.isChild()) {
    int base = 0;
    if (forked.receive(&base, sizeof base) != ForkedRanks::Handover::Received) ForkedRanks::exitChild(99);
    ForkedRanks::exitChild(base + forked.rank());
  }
  const int base = 10;
  forked.share(&base, sizeof base);
  forked.reapAll(ForkedRanks::Clock::now() + 20s);
  ASSERT_EQ(forked.children().size(), 3u);
  for (const ForkedRank& c : forked.children())
    EXPECT_EQ(c.describe(), "rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) +
                                ") exited with status " + std::to_string(10 + c.rank));
  EXPECT_FALSE(forked.allSucceeded());
}

TEST(ForkedRanks, AbandonedChildrenHearTheParentClose) {
  ForkedRanks forked(0, 2);
  if (forked.isChild()) {
    int x = 0;
    ForkedRanks::exitChild(forked.receive(&x, sizeof x) == ForkedRanks::Handover::ParentClosed ? 0 : 1);
  }
  forked.abandon();
  forked.reapAll(ForkedRanks::Clock::now() + 20s);
  EXPECT_TRUE(forked.allSucceeded());
}

TEST(ForkedRanks, OverstayersAreKilledAtTheDeadline) {
  ForkedRanks forked(0, 2);
  if (forked.isChild()) {
    if (forked.rank() == 1) std::this_thread::sleep_for(60s);
    ForkedRanks::exitChild(0);
  }
  forked.abandon();
  const auto reaped = forked.reapAll(ForkedRanks::Clock::now() + 1s);
  EXPECT_EQ(reaped.size(), 2u);
  EXPECT_TRUE(forked.children()[0].succeeded());
  const ForkedRank& late = forked.children()[1];
  EXPECT_TRUE(late.overstayed);
  EXPECT_TRUE(WIFSIGNALED(late.status) && WTERMSIG(late.status) == SIGKILL);
  EXPECT_NE(late.describe().find("did not exit by its deadline"), std::string::npos) << late.describe();
}

TEST(ForkedRanks, SharingWithADeadChildDoesNotEndTheParent) {
  ForkedRanks forked(0, 2);
  if (forked.isChild()) {
    if (forked.rank() == 0) raise(SIGKILL);
    int x = 0;
    forked.receive(&x, sizeof x);
    ForkedRanks::exitChild(x);
  }
  std::this_thread::sleep_for(200ms);  // rank 0 is gone: its pipe has no reader
  const int zero = 0;
  forked.share(&zero, sizeof zero);
  forked.reapAll(ForkedRanks::Clock::now() + 20s);
  const ForkedRank& dead = forked.children()[0];
  EXPECT_TRUE(WIFSIGNALED(dead.status) && WTERMSIG(dead.status) == SIGKILL) << dead.describe();
  EXPECT_TRUE(forked.children()[1].succeeded());
}

// A thread that spins for `spinFor`, then sleeps until release().
class Spinner {
 public:
  explicit Spinner(std::chrono::milliseconds spinFor)
      : thread_([this, spinFor] {
          const auto end = std::chrono::steady_clock::now() + spinFor;
          while (std::chrono::steady_clock::now() < end && !stop_.load()) {
          }
          spinning_.store(false);
          std::unique_lock<std::mutex> lock(mutex_);
          wake_.wait(lock, [this] { return released_; });
        }) {}
  ~Spinner() {
    stop_.store(true);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  bool spinning() const { return spinning_.load(); }

 private:
  std::atomic<bool> spinning_{true};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool released_ = false;
  std::thread thread_;
};

TEST(QuietThreads, WaitsWhileAnotherThreadRunsAndNotOnceItSleeps) {
  EXPECT_TRUE(waitUntilOtherThreadsSleep(std::chrono::steady_clock::now())) << "no other thread yet";
  Spinner spinner(60s);
  EXPECT_FALSE(waitUntilOtherThreadsSleep(std::chrono::steady_clock::now() + 50ms))
      << "the spinner runs";
}

TEST(QuietThreads, ReturnsOnceTheOtherThreadSleeps) {
  Spinner spinner(200ms);
  EXPECT_TRUE(waitUntilOtherThreadsSleep(std::chrono::steady_clock::now() + 20s));
  EXPECT_FALSE(spinner.spinning());
}

// A sanitizer's allocator keeps its locks across fork: a child forked while
// another thread is in it can hang at its first malloc (quiet_threads.h).
// The child sees the memory as it was at fork: it says whether the thread
// was still running then.
TEST(ForkedRanks, ForksOnceTheOtherThreadsSleep) {
  Spinner spinner(300ms);
  ForkedRanks forked(0, 2);
  if (forked.isChild()) ForkedRanks::exitChild(spinner.spinning() ? 1 : 0);
  forked.abandon();
  forked.reapAll(ForkedRanks::Clock::now() + 20s);
  for (const ForkedRank& c : forked.children())
    EXPECT_TRUE(c.succeeded()) << c.describe() << " (1: forked while the other thread ran)";
}

// A thread that never sleeps delays the fork by ForkedRanks' patience, not
// for good.
TEST(ForkedRanks, AThreadThatNeverSleepsDelaysTheForkOnlySoLong) {
  Spinner spinner(60s);
  const auto start = std::chrono::steady_clock::now();
  ForkedRanks forked(0, 2);
  if (forked.isChild()) ForkedRanks::exitChild(0);
  const auto took = std::chrono::steady_clock::now() - start;
  forked.abandon();
  forked.reapAll(ForkedRanks::Clock::now() + 20s);
  EXPECT_TRUE(forked.allSucceeded());
  EXPECT_LT(took, 10s) << "waited for the spinning thread as if it would sleep";
}

}  // namespace
}  // namespace coil
