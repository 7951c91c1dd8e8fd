// The tcp transport's progress thread: one per communicator (per TcpTransport).
//
// It moves every connection's slots between the SlotFifos and the sockets:
// published send slots out, socket bytes into free receive slots. It never
// spins when there is nothing to do: it sleeps in poll() over the sockets that
// have work (POLLOUT for a pending send, POLLIN when a receive slot is free)
// plus an eventfd that the executor writes through Connection::kick().
//
// The kick is a Dekker-style handshake, so an idle proxy costs the executor no
// syscall while the proxy is awake, and a wake-up is never lost:
//
//     proxy:  sleeping = 1; fence; re-check FIFO counters; poll()
//     kicker: publish (seq_cst store of tail/head); if (sleeping) write eventfd
//
// Either the proxy's re-check sees the new counter, or the kicker sees
// sleeping == 1 and writes the eventfd, which ends the poll().
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transports/proxy_waker.h"

namespace coil::transport::tcp {

class TcpChannel;
using transport::ProxyWaker;

/// The progress thread. Channels are handed over with add(); the thread keeps
/// them until they are finished (closed or both directions ended).
class TcpProxy {
 public:
  /// `rank` only labels the thread's log lines.
  explicit TcpProxy(int rank);
  /// Stops the thread (see stop()).
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  /// The waker every channel of this proxy must be built with.
  const std::shared_ptr<ProxyWaker>& waker() const { return waker_; }
  /// Hands channels to the thread (starting it on first use). Throws
  /// coilInvalidUsage after stop() or after the thread died on an error.
  void add(const std::vector<std::shared_ptr<TcpChannel>>& channels);
  /// Stops and joins the thread, then closes every channel it drove (their
  /// FIFO waits end with PeerClosed). Idempotent, safe from any thread but the
  /// proxy itself.
  void stop() noexcept;

 private:
  void run() noexcept;
  void loop();
  bool adoptNew();

  int rank_;
  std::shared_ptr<ProxyWaker> waker_;
  std::atomic<bool> stop_{false};
  std::mutex stopMutex_;                              // serialises stop(); never taken by the thread
  std::mutex mutex_;                                  // guards incoming_, stopped_, thread_
  std::vector<std::shared_ptr<TcpChannel>> incoming_;  // added, not yet adopted
  bool stopped_ = false;
  std::thread thread_;
  std::vector<std::shared_ptr<TcpChannel>> channels_;  // proxy thread only (until joined)
};

}  // namespace coil::transport::tcp
