// The launch mechanics on their own: handover, exit status in words,
// the deadline, and a child that dies before the handover.
#include "launch/forked_ranks.h"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

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

}  // namespace
}  // namespace coil
