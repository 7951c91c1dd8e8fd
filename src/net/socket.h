// Small, exception-based socket helpers shared by the bootstrap and the tcp
// transport. All I/O is non-blocking underneath and every blocking helper
// takes a Deadline (and an optional abort flag): no wait in coil is unbounded.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/deadline.h"

namespace coil {

/// True for the errno of a non-blocking call that may succeed later
/// (EAGAIN, EWOULDBLOCK, EINTR).
bool wouldBlock(int err);
/// One poll() for `events` on fd (fd < 0: only a sleep), at most
/// kWaitSliceMs and never past the deadline; EINTR returns early.
void pollSlice(int fd, short events, const Deadline& deadline);

/// An IPv4 or IPv6 address with port.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  /// Parses "host:port", "[v6]:port" or "a.b.c.d:port"; host names resolve.
  /// Throws coilInvalidArgument naming `text` on failure.
  static SocketAddress parse(const std::string& text);
  /// The first IPv4 (else IPv6) address of interface `ifname` (port 0).
  /// Throws coilInvalidUsage naming the interface if it has none.
  static SocketAddress ofInterface(const std::string& ifname);
  std::string toString() const;  // "1.2.3.4:5678" / "[::1]:5678"
  uint16_t port() const;
  void setPort(uint16_t port);
  int family() const { return storage.ss_family; }
};

/// Whether a connection between `local` and `peer` (its two ends' addresses;
/// ports ignored) never leaves this host: the peer's address is a loopback
/// one, or it is this end's own (Linux carries traffic to a host's own
/// addresses through lo). Two addresses that differ count as two hosts,
/// as network namespaces standing in for hosts are.
bool staysOnThisHost(const SocketAddress& local, const SocketAddress& peer);

/// An owned file descriptor (closed on destruction).
class Socket {
 public:
  Socket() = default;
  /// Takes `fd` (may be -1) and lists it for fork (socket_registry.h).
  explicit Socket(int fd);
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  ~Socket();
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();  // closes
  /// shutdown(SHUT_RDWR) without closing: a peer blocked on us sees EOF, a
  /// thread of ours blocked in poll() wakes up.
  void shutdownBoth() noexcept;

  /// Listening socket bound to `addr` (port 0 picks one), non-blocking.
  static Socket listen(const SocketAddress& addr, int backlog = 4096);
  /// Whether a refused connection may be retried.
  enum class Refused {
    kRetry,  // the peer may not be listening yet
    kFinal,  // the peer listened before it published `addr`: it is gone
  };
  /// Connects to `addr`, retrying ECONNREFUSED until the deadline unless
  /// `refused` is kFinal (then coilRemoteError at once). Non-blocking,
  /// TCP_NODELAY set.
  static Socket connect(const SocketAddress& addr, const Deadline& deadline,
                        const std::atomic<bool>* abortFlag = nullptr,
                        Refused refused = Refused::kRetry);
  /// Accepts one connection; waits until the deadline. TCP_NODELAY set.
  Socket accept(const Deadline& deadline, const std::atomic<bool>* abortFlag = nullptr,
                SocketAddress* peer = nullptr);

  /// Sends/receives exactly n bytes, waiting with poll() up to the deadline.
  /// EOF or reset → coilRemoteError (message includes `peerName`);
  /// deadline → coilTimeout; abort flag → coilRemoteError("aborted").
  void sendAll(const void* buf, size_t n, const Deadline& deadline,
               const std::atomic<bool>* abortFlag = nullptr, const char* peerName = "peer");
  void recvAll(void* buf, size_t n, const Deadline& deadline,
               const std::atomic<bool>* abortFlag = nullptr, const char* peerName = "peer");

  SocketAddress localAddress() const;
  SocketAddress peerAddress() const;

 private:
  int fd_ = -1;
};

/// Sends `sendBuf` on `to` while receiving `recvBuf` from `from` (both
/// exactly), interleaved with poll() so that a ring of ranks all sending at
/// once cannot deadlock on full socket buffers. `to` and `from` may be the
/// same socket. Errors name `peerName` (failures on `to`) or `fromName`
/// (failures on `from`; nullptr: `peerName` too). Same error codes as
/// sendAll/recvAll.
/// How to watch `to` while we wait on `from`, when `to`'s peer never sends
/// on it (a ring): a byte arriving there is its failure notice
/// (Bootstrap::abandon), so fail at once.
enum class WatchTo {
  kNo,
  kNoticeOrClose,  // its close is a failure too: it still needs our data
  kNotice,         // its close is not: it may have finished and left
};
void sendRecvAll(Socket& to, const void* sendBuf, size_t sendBytes, Socket& from, void* recvBuf,
                 size_t recvBytes, const Deadline& deadline, const std::atomic<bool>* abortFlag,
                 const char* peerName, const char* fromName = nullptr,
                 WatchTo watchTo = WatchTo::kNo);

}  // namespace coil
