#include "core/deadline.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace coil {

Deadline Deadline::after(int64_t ms) {
  Deadline d;
  if (ms <= 0) return never();
  d.totalMs_ = ms;
  d.at_ = Clock::now() + std::chrono::milliseconds(ms);
  return d;
}

int64_t coarseMonotonicMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

Deadline ReusedDeadline::forCall(int64_t timeoutMs) {
  const int64_t now = coarseMonotonicMs();
  calledAtMs_ = now;
  if (timeoutMs != timeoutMs_ || now - setAtMs_ >= kReuseMs) {
    timeoutMs_ = timeoutMs;
    setAtMs_ = now;
    deadline_ = Deadline::after(timeoutMs);
  }
  return deadline_;
}

Deadline Deadline::never() {
  Deadline d;
  d.totalMs_ = 0;
  d.at_ = Clock::time_point::max();
  return d;
}

int Deadline::remainingMs() const {
  if (at_ == Clock::time_point::max()) return INT_MAX;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

void futexWait(const std::atomic<uint32_t>* word, uint32_t seen, int ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = static_cast<long>(ms % 1000) * 1000000L;
  // Not FUTEX_PRIVATE: the word may be in a segment shared with another process.
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futexWakeAll(const std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

}  // namespace coil
