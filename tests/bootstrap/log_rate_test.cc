// The rate limiter behind the refusal warnings (core/log_rate.h), on a
// clock the test controls: a burst per interval, then silence, and every
// held-back line reported once, before the next line that gets out.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/log_rate.h"

namespace coil::log {
namespace {

using std::chrono::milliseconds;

TEST(LogRate, BurstThenSilenceThenSummaryInTheNextInterval) {
  RateLimiter limiter(3, milliseconds(1000));
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 3; ++i) {
    auto v = limiter.admit(t0 + milliseconds(i));
    EXPECT_TRUE(v.print) << i;
    EXPECT_EQ(v.unreported, 0u) << i;
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.admit(t0 + milliseconds(10)).print);
  // Still the same interval: held back.
  EXPECT_FALSE(limiter.admit(t0 + milliseconds(999)).print);
  // The next interval: out again, with the count of what was held back.
  auto v = limiter.admit(t0 + milliseconds(1000));
  EXPECT_TRUE(v.print);
  EXPECT_EQ(v.unreported, 1001u);
  // Reported once only.
  v = limiter.admit(t0 + milliseconds(1001));
  EXPECT_TRUE(v.print);
  EXPECT_EQ(v.unreported, 0u);
}

TEST(LogRate, TakeUnreportedEmptiesTheCount) {
  RateLimiter limiter(1, milliseconds(1000));
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(limiter.admit(t0).print);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limiter.admit(t0).print);
  EXPECT_EQ(limiter.takeUnreported(), 5u);
  EXPECT_EQ(limiter.takeUnreported(), 0u);
  EXPECT_EQ(limiter.admit(t0 + milliseconds(2000)).unreported, 0u);
}

TEST(LogRate, ConcurrentCallersNeitherLoseNorDuplicateLines) {
  RateLimiter limiter(10, std::chrono::hours(1));
  std::atomic<uint64_t> printed{0}, reported{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        auto v = limiter.admit(Clock::now());
        printed += v.print ? 1 : 0;
        reported += v.unreported;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(printed.load(), 10u);
  EXPECT_EQ(printed.load() + reported.load() + limiter.takeUnreported(), 40000u);
}

}  // namespace
}  // namespace coil::log
