// Sockets for the bootstrap and the tcp transport: non-blocking underneath,
// every wait a poll() slice of at most kWaitSliceMs so abort flags and
// deadlines are noticed promptly.
#include "net/socket.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "core/error.h"
#include "net/socket_registry.h"

namespace coil {
namespace {

bool isAborted(const std::atomic<bool>* flag) {
  return flag != nullptr && flag->load(std::memory_order_relaxed);
}

// One poll() slice: never longer than kWaitSliceMs, never past the deadline.
int sliceMs(const Deadline& deadline) { return std::min(deadline.remainingMs(), kWaitSliceMs); }

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Errors a connect() may see while the peer is not listening yet.
bool connectRetryable(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ECONNABORTED || err == ETIMEDOUT ||
         err == EAGAIN || err == EINTR;
}

[[noreturn]] void failTimeout(const Deadline& deadline, const std::string& what) {
  fail(coilTimeout, "timed out after ", deadline.totalMs(), " ms ", what);
}

[[noreturn]] void failAborted(const std::string& what) { fail(coilRemoteError, "aborted ", what); }

// A send()/recv() error on an established connection: the peer is gone or
// the path to it broke, which callers treat as a remote failure.
[[noreturn]] void failPeerIo(const char* verb, const char* peerName, int err) {
  if (err == EPIPE || err == ECONNRESET)
    fail(coilRemoteError, "connection to ", peerName, " was closed or reset while ", verb, " (",
         std::strerror(err), ")");
  fail(coilRemoteError, verb, " ", peerName, " failed: ", std::strerror(err), " (errno ", err, ")");
}

[[noreturn]] void failPeerClosed(const char* peerName, size_t got, size_t want) {
  fail(coilRemoteError, peerName, " closed the connection (received ", got, " of ", want,
       " bytes)");
}

// Waits (one slice) for `events` on fd. Throws at the deadline or on abort;
// `what` describes the wait for those messages. Returns after readiness, an
// error/hangup condition (the caller's next syscall reports it) or a slice.
template <typename Describe>
void waitOnce(int fd, short events, const Deadline& deadline, const std::atomic<bool>* abortFlag,
              Describe&& what) {
  if (isAborted(abortFlag)) failAborted(what());
  if (deadline.expired()) failTimeout(deadline, what());
  pollSlice(fd, events, deadline);
}

std::string scopeName(uint32_t scope) {
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(scope, name) != nullptr) return name;
  return std::to_string(scope);
}

}  // namespace

bool wouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

void pollSlice(int fd, short events, const Deadline& deadline) {
  pollfd p{fd, events, 0};
  if (::poll(&p, 1, sliceMs(deadline)) < 0 && errno != EINTR) failErrno("poll", errno);
}

// ---------------------------------------------------------------- addresses

SocketAddress SocketAddress::parse(const std::string& text) {
  auto bad = [&](const std::string& why) {
    fail(coilInvalidArgument, "invalid address '", text, "': ", why);
  };
  std::string host, port;
  bool bracketed = false;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) bad("missing ']' after the IPv6 address");
    if (close + 1 >= text.size() || text[close + 1] != ':') bad("expected [IPv6]:port");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    bracketed = true;
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) bad("expected host:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) bad("IPv6 addresses need brackets, as in [::1]:port");
  }
  if (host.empty()) bad("the host is empty");
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stol(port) > 65535)
    bad("the port must be a number in [0, 65535]");

  addrinfo hints{};
  hints.ai_family = bracketed ? AF_INET6 : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (bracketed ? AI_NUMERICHOST : 0);
  addrinfo* results = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &results);
  if (rc != 0) bad("cannot resolve '" + host + "': " + gai_strerror(rc));
  // Prefer IPv4 when a name has both: it is what every rank resolves alike.
  const addrinfo* chosen = nullptr;
  for (const addrinfo* a = results; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      chosen = a;
      break;
    }
    if (a->ai_family == AF_INET6 && chosen == nullptr) chosen = a;
  }
  SocketAddress out;
  if (chosen != nullptr) {
    std::memcpy(&out.storage, chosen->ai_addr, chosen->ai_addrlen);
    out.length = chosen->ai_addrlen;
  }
  freeaddrinfo(results);
  if (chosen == nullptr) bad("'" + host + "' has no IPv4 or IPv6 address");
  return out;
}

SocketAddress SocketAddress::ofInterface(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) failErrno("getifaddrs", errno);
  SocketAddress v4, v6;
  bool exists = false;
  std::string available;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_name == nullptr) continue;
    std::string name = i->ifa_name;
    if ((" " + available + " ").find(" " + name + " ") == std::string::npos)
      available += (available.empty() ? "" : " ") + name;
    if (name != ifname) continue;
    exists = true;
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET && v4.length == 0) {
      std::memcpy(&v4.storage, i->ifa_addr, sizeof(sockaddr_in));
      v4.length = sizeof(sockaddr_in);
    } else if (i->ifa_addr->sa_family == AF_INET6 && v6.length == 0) {
      std::memcpy(&v6.storage, i->ifa_addr, sizeof(sockaddr_in6));
      v6.length = sizeof(sockaddr_in6);
    }
  }
  freeifaddrs(list);
  if (!exists)
    fail(coilInvalidUsage, "network interface '", ifname, "' does not exist (interfaces: ",
         available, ")");
  SocketAddress out = v4.length != 0 ? v4 : v6;
  if (out.length == 0)
    fail(coilInvalidUsage, "network interface '", ifname, "' has no IPv4 or IPv6 address");
  out.setPort(0);
  return out;
}

std::string SocketAddress::toString() const {
  char ip[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
    std::string host = ip;
    if (a->sin6_scope_id != 0) {
      host += '%';
      host += scopeName(a->sin6_scope_id);
    }
    std::string text = "[";
    text += host;
    text += "]:";
    text += std::to_string(port());
    return text;
  }
  return "<no address>";
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

// ------------------------------------------------------------------ sockets

Socket::Socket(int fd) : fd_(fd) { listSocket(fd_); }

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Socket::~Socket() { reset(); }

void Socket::reset() {
  closeListedSocket(fd_);
  fd_ = -1;
}

void Socket::shutdownBoth() noexcept {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Socket Socket::listen(const SocketAddress& addr, int backlog) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) failErrno("cannot create a socket to listen on " + addr.toString(), errno);
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0)
    failErrno("cannot listen on " + addr.toString(), errno);
  if (::listen(s.fd(), backlog) != 0) failErrno("cannot listen on " + addr.toString(), errno);
  return s;
}

Socket Socket::connect(const SocketAddress& addr, const Deadline& deadline,
                       const std::atomic<bool>* abortFlag, Refused refused) {
  auto what = [&] { return "connecting to " + addr.toString(); };
  int backoffMs = 10;
  int lastError = 0;
  for (;;) {
    if (isAborted(abortFlag)) failAborted(what());
    Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) failErrno("cannot create a socket to connect to " + addr.toString(), errno);
    setNoDelay(s.fd());
    int err = 0;
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        // The handshake continues in the kernel; writable means it ended.
        for (;;) {
          pollfd p{s.fd(), POLLOUT, 0};
          if (isAborted(abortFlag)) failAborted(what());
          if (deadline.expired()) failTimeout(deadline, what() + " (connection in progress)");
          int rc = ::poll(&p, 1, sliceMs(deadline));
          if (rc < 0 && errno != EINTR) failErrno("poll", errno);
          if (rc > 0) break;
        }
        socklen_t len = sizeof err;
        if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) return s;
    if (err == ECONNREFUSED && refused == Refused::kFinal)
      fail(coilRemoteError, "cannot connect to ", addr.toString(),
           ": connection refused, although the peer was listening there: it exited or failed");
    if (!connectRetryable(err)) failErrno("cannot connect to " + addr.toString(), err);
    lastError = err;
    s.reset();
    // The peer may not be listening yet: back off and try again.
    auto wakeAt = Clock::now() + std::chrono::milliseconds(backoffMs);
    for (;;) {
      if (isAborted(abortFlag)) failAborted(what());
      if (deadline.expired())
        failTimeout(deadline, what() + " (last error: " + std::strerror(lastError) + ")");
      auto now = Clock::now();
      if (now >= wakeAt) break;
      auto leftMs = std::chrono::duration_cast<std::chrono::milliseconds>(wakeAt - now).count();
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::min<int64_t>({leftMs + 1, kWaitSliceMs, deadline.remainingMs() + 1})));
    }
    backoffMs = std::min(backoffMs * 2, 200);
  }
}

Socket Socket::accept(const Deadline& deadline, const std::atomic<bool>* abortFlag,
                      SocketAddress* peer) {
  for (;;) {
    SocketAddress from;
    from.length = sizeof from.storage;
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&from.storage), &from.length,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      if (peer != nullptr) *peer = from;
      return Socket(fd);
    }
    int err = errno;
    if (!wouldBlock(err) && err != ECONNABORTED && err != EPROTO)
      failErrno("accept on " + localAddress().toString(), err);
    waitOnce(fd_, POLLIN, deadline, abortFlag,
             [&] { return "waiting for a connection on " + localAddress().toString(); });
  }
}

void Socket::sendAll(const void* buf, size_t n, const Deadline& deadline,
                     const std::atomic<bool>* abortFlag, const char* peerName) {
  const auto* p = static_cast<const uint8_t*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t k = ::send(fd_, p + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    int err = k < 0 ? errno : EAGAIN;
    if (!wouldBlock(err)) failPeerIo("sending to", peerName, err);
    waitOnce(fd_, POLLOUT, deadline, abortFlag, [&] {
      return "sending " + std::to_string(n) + " bytes to " + peerName + " (sent " +
             std::to_string(done) + ")";
    });
  }
}

void Socket::recvAll(void* buf, size_t n, const Deadline& deadline,
                     const std::atomic<bool>* abortFlag, const char* peerName) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t k = ::recv(fd_, p + done, n - done, MSG_DONTWAIT);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) failPeerClosed(peerName, done, n);
    int err = errno;
    if (!wouldBlock(err)) failPeerIo("receiving from", peerName, err);
    waitOnce(fd_, POLLIN, deadline, abortFlag, [&] {
      return "waiting to receive " + std::to_string(n) + " bytes from " + peerName + " (got " +
             std::to_string(done) + ")";
    });
  }
}

namespace {

// The IPv4 address an AF_INET or IPv4-mapped AF_INET6 address carries.
std::optional<in_addr> ipv4Of(const SocketAddress& a) {
  if (a.family() == AF_INET) return reinterpret_cast<const sockaddr_in&>(a.storage).sin_addr;
  if (a.family() != AF_INET6) return std::nullopt;
  const in6_addr& v6 = reinterpret_cast<const sockaddr_in6&>(a.storage).sin6_addr;
  if (!IN6_IS_ADDR_V4MAPPED(&v6)) return std::nullopt;
  in_addr v4;
  std::memcpy(&v4, v6.s6_addr + 12, sizeof v4);
  return v4;
}

}  // namespace

bool staysOnThisHost(const SocketAddress& local, const SocketAddress& peer) {
  const std::optional<in_addr> local4 = ipv4Of(local), peer4 = ipv4Of(peer);
  if (peer4) {
    if ((ntohl(peer4->s_addr) >> 24) == 127) return true;  // 127.0.0.0/8
    return local4 && local4->s_addr == peer4->s_addr;
  }
  if (peer.family() != AF_INET6 || local.family() != AF_INET6) return false;
  const in6_addr& p6 = reinterpret_cast<const sockaddr_in6&>(peer.storage).sin6_addr;
  const in6_addr& l6 = reinterpret_cast<const sockaddr_in6&>(local.storage).sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(&p6) || std::memcmp(&p6, &l6, sizeof p6) == 0;
}

SocketAddress Socket::localAddress() const {
  SocketAddress a;
  a.length = sizeof a.storage;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0)
    failErrno("getsockname", errno);
  return a;
}

SocketAddress Socket::peerAddress() const {
  SocketAddress a;
  a.length = sizeof a.storage;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0)
    failErrno("getpeername", errno);
  return a;
}

void sendRecvAll(Socket& to, const void* sendBuf, size_t sendBytes, Socket& from, void* recvBuf,
                 size_t recvBytes, const Deadline& deadline, const std::atomic<bool>* abortFlag,
                 const char* peerName, const char* fromName, WatchTo watchTo) {
  if (fromName == nullptr) fromName = peerName;
  const auto* out = static_cast<const uint8_t*>(sendBuf);
  auto* in = static_cast<uint8_t*>(recvBuf);
  size_t sent = 0, got = 0;
  if (to.fd() == from.fd()) watchTo = WatchTo::kNo;
  bool toReadable = false;  // the last poll saw something on `to`
  while (sent < sendBytes || got < recvBytes) {
    // Move whatever can move without waiting, in both directions; wait only
    // when neither can. A full send buffer never stops us from draining the
    // receive side, which is what keeps a ring of senders deadlock-free.
    bool progressed = false;
    if (sent < sendBytes) {
      ssize_t k = ::send(to.fd(), out + sent, sendBytes - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        sent += static_cast<size_t>(k);
        progressed = true;
      } else if (k < 0 && !wouldBlock(errno)) {
        failPeerIo("sending to", peerName, errno);
      }
    }
    if (got < recvBytes) {
      ssize_t k = ::recv(from.fd(), in + got, recvBytes - got, MSG_DONTWAIT);
      if (k > 0) {
        got += static_cast<size_t>(k);
        progressed = true;
      } else if (k == 0) {
        failPeerClosed(fromName, got, recvBytes);
      } else if (!wouldBlock(errno)) {
        failPeerIo("receiving from", fromName, errno);
      }
    }
    if (progressed) continue;
    // Nothing moved, so the data we wait for is not there: now a notice or
    // a close on `to` decides (data that did arrive is used first, so a
    // peer that sent its part and then failed still lets this step finish).
    if (watchTo != WatchTo::kNo && toReadable) {
      uint8_t notice;
      const ssize_t k = ::recv(to.fd(), &notice, 1, MSG_PEEK | MSG_DONTWAIT);
      if (k == 1)
        fail(coilRemoteError, peerName, " failed and closed the ring (it reported an error)");
      if (k == 0 || (k < 0 && !wouldBlock(errno))) {
        if (watchTo == WatchTo::kNoticeOrClose)
          fail(coilRemoteError, peerName,
               " closed the ring before it had all this rank's data: it failed or died");
        watchTo = WatchTo::kNo;  // it finished and left: only `from` matters now
      }
      toReadable = false;
    }

    if (isAborted(abortFlag) || deadline.expired()) {
      std::string what = "exchanging data: sent " + std::to_string(sent) + " of " +
                         std::to_string(sendBytes) + " bytes to " + peerName + ", received " +
                         std::to_string(got) + " of " + std::to_string(recvBytes) + " from " +
                         fromName;
      if (isAborted(abortFlag)) failAborted(what);
      failTimeout(deadline, what);
    }
    pollfd fds[2];
    nfds_t count = 0;
    short sendEvents = sent < sendBytes ? POLLOUT : 0;
    short recvEvents = got < recvBytes ? POLLIN : 0;
    const short toEvents =
        static_cast<short>(sendEvents | (watchTo != WatchTo::kNo ? POLLIN : 0));
    if (to.fd() == from.fd()) {
      fds[count++] = pollfd{to.fd(), static_cast<short>(sendEvents | recvEvents), 0};
    } else {
      if (toEvents) fds[count++] = pollfd{to.fd(), toEvents, 0};
      if (recvEvents) fds[count++] = pollfd{from.fd(), recvEvents, 0};
    }
    if (::poll(fds, count, sliceMs(deadline)) < 0 && errno != EINTR) failErrno("poll", errno);
    toReadable = watchTo != WatchTo::kNo && toEvents != 0 &&
                 (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
}

}  // namespace coil
