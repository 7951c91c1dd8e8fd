#include "transports/proxy_waker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.h"

namespace coil::transport {

ProxyWaker::ProxyWaker() {
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) failErrno("eventfd for a transport's progress thread", errno);
}

ProxyWaker::~ProxyWaker() {
  if (fd_ >= 0) ::close(fd_);
}

void ProxyWaker::kick() noexcept {
  // The caller's publish was a seq_cst store; this seq_cst load pairs with the
  // proxy's store + fence in beginSleep(). The exchange lets only one of
  // several concurrent kickers pay for the write.
  if (sleeping_.load(std::memory_order_seq_cst) != 0 &&
      sleeping_.exchange(0, std::memory_order_seq_cst) != 0)
    wake();
}

void ProxyWaker::wake() noexcept {
  uint64_t one = 1;
  // Only fails (EAGAIN) if the counter is saturated, i.e. a wake is pending.
  ssize_t rc = ::write(fd_, &one, sizeof one);
  (void)rc;
}

void ProxyWaker::beginSleep() noexcept {
  sleeping_.store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void ProxyWaker::endSleep() noexcept {
  sleeping_.store(0, std::memory_order_relaxed);
  uint64_t count;
  while (::read(fd_, &count, sizeof count) == static_cast<ssize_t>(sizeof count)) {
  }
}

}  // namespace coil::transport
