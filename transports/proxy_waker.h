// ProxyWaker: how the executor wakes a transport's progress thread (tcp's
// proxy, ib's completion poller) without a syscall while it is awake.
//
// The kick is a Dekker-style handshake, so an idle proxy costs the executor
// no syscall while the proxy is awake, and a wake-up is never lost:
//
//     proxy:  beginSleep(); re-check FIFO counters; poll() incl. fd()
//     kicker: publish (seq_cst store of tail/head); kick()
//
// Either the proxy's re-check sees the new counter, or the kicker sees the
// sleeping flag and writes the eventfd, which ends the poll().
#pragma once

#include <atomic>
#include <cstdint>

namespace coil::transport {

/// The eventfd and sleeping flag of one proxy. Shared (shared_ptr) by the
/// proxy and every channel, so that a kick() from a connection that outlives
/// its transport stays safe.
class ProxyWaker {
 public:
  /// Creates the eventfd; throws coilSystemError if it cannot.
  ProxyWaker();
  ~ProxyWaker();
  ProxyWaker(const ProxyWaker&) = delete;
  ProxyWaker& operator=(const ProxyWaker&) = delete;

  /// The descriptor the proxy polls for POLLIN.
  int fd() const { return fd_; }
  /// Executor side, after a publish/release: wakes the proxy only if it is
  /// asleep or about to sleep. No syscall otherwise.
  void kick() noexcept;
  /// Wakes the proxy unconditionally (stop, close, new connections).
  void wake() noexcept;
  /// Proxy side: announces the coming sleep. The caller re-checks all work
  /// after this and only then polls.
  void beginSleep() noexcept;
  /// Proxy side: awake again; consumes pending eventfd wake-ups (one
  /// non-blocking read).
  void endSleep() noexcept;

 private:
  int fd_ = -1;
  std::atomic<uint32_t> sleeping_{0};
};

}  // namespace coil::transport
