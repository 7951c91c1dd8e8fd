#include "core/log_rate.h"

#include <chrono>

#include "core/fork_guard.h"

namespace coil::log {

RateLimiter::RateLimiter(int burst, Clock::duration interval)
    : burst_(burst < 1 ? 1 : burst), interval_(interval) {}

RateLimiter::Verdict RateLimiter::admit(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (!started_ || now - windowStart_ >= interval_) {
    started_ = true;
    windowStart_ = now;
    printedInWindow_ = 0;
  }
  Verdict v;
  if (printedInWindow_ < burst_) {
    ++printedInWindow_;
    v.print = true;
    v.unreported = heldBack_;
    heldBack_ = 0;
  } else {
    ++heldBack_;
  }
  return v;
}

uint64_t RateLimiter::takeUnreported() {
  std::lock_guard lock(mutex_);
  uint64_t n = heldBack_;
  heldBack_ = 0;
  return n;
}

LimitedWarning::LimitedWarning(unsigned subsys, std::string what, int burst,
                               Clock::duration interval)
    : subsys_(subsys), what_(std::move(what)), limiter_(burst, interval) {
  guardAcrossFork(limiter_.mutex());
}

void LimitedWarning::flush() {
  if (uint64_t n = limiter_.takeUnreported(); n != 0) summarize(n);
}

void LimitedWarning::summarize(uint64_t count) {
  const auto seconds =
      std::chrono::duration_cast<std::chrono::milliseconds>(limiter_.interval()).count() / 1000.0;
  print(Level::Warn, subsys_, count, " more ", what_, " suppressed (at most ", limiter_.burst(),
        " logged per ", seconds, " s)");
}

}  // namespace coil::log
