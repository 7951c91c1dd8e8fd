#include "net/acceptor.h"

#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log_rate.h"

namespace coil {

AuthenticatedAcceptor::AuthenticatedAcceptor(Socket& listener, const uint8_t* secret,
                                             std::string purpose, size_t helloBytes,
                                             std::string context, int handshakeMs)
    : listener_(listener),
      secret_(secret),
      purpose_(std::move(purpose)),
      helloBytes_(helloBytes),
      context_(std::move(context)),
      handshakeMs_(handshakeMs) {}

namespace {
// Built at load, not at first use: the rendezvous root's thread refuses
// connections while the application may fork (core/log.cc says why that
// rules out a function-local static).
log::LimitedWarning* const gRefusals =
    new log::LimitedWarning(log::kBoot, "refused connections", kRefusalBurst, kRefusalInterval);
log::LimitedWarning& refusals() { return *gRefusals; }
}  // namespace

void logRefusedConnection(const SocketAddress& peer, const std::string& why,
                          const std::string& context) {
  refusals().warn("refused connection from ", peer.toString(), ": ", why, " (", context, ")");
}

AuthenticatedAcceptor::~AuthenticatedAcceptor() { refusals().flush(); }

void AuthenticatedAcceptor::refuse(Pending& p, const std::string& why) {
  logRefusedConnection(p.peer, why, context_);
  p.socket.reset();
  p.finished = true;
}

void AuthenticatedAcceptor::acceptWaiting() {
  while (pending_.size() < kMaxPending) {
    Pending p;
    p.peer.length = sizeof p.peer.storage;
    int fd = ::accept4(listener_.fd(), reinterpret_cast<sockaddr*>(&p.peer.storage),
                       &p.peer.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) return;
      if (err == ECONNABORTED || err == EPROTO) continue;
      failErrno("accept (" + context_ + ")", err);
    }
    p.socket = Socket(fd);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    p.expires = Clock::now() + std::chrono::milliseconds(handshakeMs_);
    auth::randomBytes(p.nonce, sizeof p.nonce);
    p.buffer.resize(auth::kClientProofBytes);
    // A fresh socket's send buffer is empty, so 16 bytes go out at once.
    ssize_t k = ::send(fd, p.nonce, sizeof p.nonce, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k != static_cast<ssize_t>(sizeof p.nonce)) {
      refuse(p, std::string("could not send the challenge: ") +
                    (k < 0 ? std::strerror(errno) : "short write"));
      continue;
    }
    pending_.push_back(std::move(p));
  }
}

void AuthenticatedAcceptor::service(Pending& p) {
  while (!p.finished) {
    ssize_t k = ::recv(p.socket.fd(), p.buffer.data() + p.have, p.buffer.size() - p.have,
                       MSG_DONTWAIT);
    if (k == 0) {
      refuse(p, p.authenticated ? "closed the connection before sending its hello"
                                : "closed the connection during authentication");
      return;
    }
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      refuse(p, std::string("receive failed: ") + std::strerror(errno));
      return;
    }
    p.have += static_cast<size_t>(k);
    if (p.have < p.buffer.size()) continue;

    if (!p.authenticated) {
      uint8_t reply[auth::kMacBytes];
      if (!auth::checkClientProof(secret_, purpose_.c_str(), p.nonce, p.buffer.data(), reply)) {
        refuse(p, "failed authentication (wrong secret, or not a coil peer)");
        return;
      }
      ssize_t sent = ::send(p.socket.fd(), reply, sizeof reply, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent != static_cast<ssize_t>(sizeof reply)) {
        refuse(p, "could not send our proof");
        return;
      }
      p.authenticated = true;
      p.buffer.assign(helloBytes_, 0);
      p.have = 0;
    }
    if (p.have == p.buffer.size()) {
      ready_.push_back(Accepted{std::move(p.socket), p.peer, std::move(p.buffer)});
      p.finished = true;
    }
  }
}

std::optional<AuthenticatedAcceptor::Accepted> AuthenticatedAcceptor::next(
    const Deadline& deadline, const std::function<bool()>& stop) {
  std::vector<pollfd> fds;
  for (;;) {
    if (!ready_.empty()) {
      Accepted a = std::move(ready_.front());
      ready_.pop_front();
      return a;
    }
    if (stop && stop()) return std::nullopt;
    if (deadline.expired()) return std::nullopt;

    auto now = Clock::now();
    for (Pending& p : pending_)
      if (now >= p.expires)
        refuse(p, "did not complete the handshake within " + std::to_string(handshakeMs_) + " ms");
    std::erase_if(pending_, [](const Pending& p) { return p.finished; });

    // fds[0] is the listener (ignored while the pending table is full);
    // fds[1 + i] is pending_[i].
    const short listenEvents = pending_.size() < kMaxPending ? POLLIN : 0;
    fds.assign(1, pollfd{listener_.fd(), listenEvents, 0});
    for (const Pending& p : pending_) fds.push_back(pollfd{p.socket.fd(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), std::min(deadline.remainingMs(), kWaitSliceMs));
    if (rc < 0) {
      if (errno == EINTR) continue;
      failErrno("poll (" + context_ + ")", errno);
    }
    if (rc == 0) continue;
    for (size_t i = 0; i + 1 < fds.size(); ++i)
      if (fds[i + 1].revents != 0) service(pending_[i]);
    std::erase_if(pending_, [](const Pending& p) { return p.finished; });
    if (fds[0].revents != 0) acceptWaiting();
  }
}

}  // namespace coil
