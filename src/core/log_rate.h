// Rate limits for log lines that someone outside the job can trigger.
//
// Each stranger a listener refuses deserves a warning (it may be a rank
// started with the wrong secret), but a stranger can connect thousands of
// times a second: unlimited, one such flood wrote 150,000 lines (22 MB) in
// 10 s, burying every useful line and filling disks. A limiter lets the
// first `burst` lines of each interval through and counts the rest; the
// count is written as one summary line ("N more refused connections
// suppressed") before the next line that is let through, or on flush().
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "core/deadline.h"
#include "core/log.h"

namespace coil::log {

/// The decision logic, without output. Thread-safe.
class RateLimiter {
 public:
  struct Verdict {
    bool print = false;       // write this line
    uint64_t unreported = 0;  // lines held back before it: summarise them first
  };

  /// burst >= 1 lines per `interval`.
  RateLimiter(int burst, Clock::duration interval);

  /// One line that wants out at `now` (non-decreasing across calls).
  Verdict admit(Clock::time_point now);
  /// Lines held back and not yet reported; the count restarts at zero.
  uint64_t takeUnreported();

  int burst() const { return burst_; }
  Clock::duration interval() const { return interval_; }
  /// The lock, for guardAcrossFork (LimitedWarning registers it).
  std::mutex& mutex() { return mutex_; }

 private:
  const int burst_;
  const Clock::duration interval_;
  std::mutex mutex_;
  bool started_ = false;
  Clock::time_point windowStart_{};
  int printedInWindow_ = 0;
  uint64_t heldBack_ = 0;
};

/// A warning of one kind (`what`, plural: "refused connections") written
/// through a RateLimiter. Create it once and never destroy it: its lock is
/// held across fork() (fork_guard.h), which needs it to live forever.
class LimitedWarning {
 public:
  LimitedWarning(unsigned subsys, std::string what, int burst, Clock::duration interval);
  LimitedWarning(const LimitedWarning&) = delete;
  LimitedWarning& operator=(const LimitedWarning&) = delete;

  template <typename... Parts>
  void warn(const Parts&... parts) {
    if (!enabled(Level::Warn, subsys_)) return;
    const RateLimiter::Verdict v = limiter_.admit(Clock::now());
    if (v.unreported != 0) summarize(v.unreported);
    if (v.print) print(Level::Warn, subsys_, parts...);
  }
  /// Writes the summary of lines held back so far, if any (call when the
  /// source of the lines goes away, so the count is not left unreported).
  void flush();

 private:
  void summarize(uint64_t count);

  const unsigned subsys_;
  const std::string what_;
  RateLimiter limiter_;
};

}  // namespace coil::log
