#include "net/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "net/socket.h"

namespace coil {
namespace {

constexpr uint32_t kMagic = 0xC011FD5Eu;
constexpr size_t kMaxName = 90;  // sun_path holds 108 bytes, with "\0coil-fd-"

struct Header {
  uint32_t magic;
  uint32_t count;  // descriptors attached
  uint64_t tag;
};

// The abstract address of mailbox `name`, and its length (no terminator:
// abstract names are counted, not terminated).
socklen_t addressOf(const std::string& name, sockaddr_un* addr) {
  if (name.empty() || name.size() > kMaxName)
    fail(coilInvalidArgument, "fd mailbox name '", name, "' must have 1 to ", kMaxName,
         " characters");
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  const std::string path = std::string(1, '\0') + "coil-fd-" + name;
  std::memcpy(addr->sun_path, path.data(), path.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
}

OwnedFd seqpacketSocket() {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) failErrno("socket(AF_UNIX, SOCK_SEQPACKET)", errno);
  return OwnedFd(fd);
}

// One wait of at most kWaitSliceMs for `events` on fd, after the abort
// flag, the deadline and the caller's check. `what` names the wait.
void waitSlice(int fd, short events, const Deadline& deadline, const std::atomic<bool>* abortFlag,
               const FdMailbox::Check& check, const std::string& what) {
  if (abortFlag != nullptr && abortFlag->load(std::memory_order_relaxed))
    fail(coilRemoteError, "aborted while ", what);
  if (deadline.expired()) fail(coilTimeout, "timed out after ", deadline.totalMs(), " ms ", what);
  if (check) check();
  pollSlice(fd, events, deadline);
}

// After recv saw the peer's close (0, or ECONNRESET, which reading
// clears), one more non-blocking look. Linux's receive path for these
// sockets checks the queue and then the shutdown without one lock over
// both, so a message the peer sent just before closing can be reported as
// the close first (14 of 1.2 million acknowledgements, five processes on
// two cores: tests/bootstrap/fd_passing_test.cc). The close is visible
// now, so a message sent before it is in the queue.
ssize_t secondLook(int fd, char* byte) { return ::recv(fd, byte, 1, MSG_DONTWAIT); }
ssize_t secondLook(int fd, msghdr* msg) {
  return ::recvmsg(fd, msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
}

}  // namespace

FdMailbox::FdMailbox(const std::string& name) : name_(name), listener_(seqpacketSocket()) {
  sockaddr_un addr;
  const socklen_t len = addressOf(name, &addr);
  if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    if (err == EADDRINUSE)
      fail(coilSystemError, "fd mailbox '", name, "' is already open on this host");
    failErrno("bind fd mailbox '" + name + "'", err);
  }
  if (::listen(listener_.get(), 128) != 0) failErrno("listen fd mailbox '" + name + "'", errno);
}

void FdMailbox::send(const std::string& to, uint64_t tag, std::span<const int> fds,
                     const Deadline& deadline, const std::atomic<bool>* abortFlag,
                     const Check& check) {
  if (fds.size() > kMaxFds)
    fail(coilInvalidArgument, "fd mailbox '", to, "': ", fds.size(),
         " descriptors in one message (at most ", kMaxFds, ")");
  sockaddr_un addr;
  const socklen_t len = addressOf(to, &addr);
  const std::string what = "sending " + std::to_string(fds.size()) +
                           " descriptors to fd mailbox '" + to + "'";
  // Connect, retrying while nobody listens under that name yet (refused)
  // or its backlog is full (EAGAIN: a Unix socket does not queue the try).
  OwnedFd s;
  for (;;) {
    s = seqpacketSocket();
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0) break;
    const int err = errno;
    if (err != ECONNREFUSED && err != ENOENT && err != EAGAIN && err != EINTR)
      failErrno(what + ": connect", err);
    waitSlice(-1, 0, deadline, abortFlag, check, what + " (nobody listens under that name yet)");
  }
  Header header{kMagic, static_cast<uint32_t>(fds.size()), tag};
  iovec iov{&header, sizeof header};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    if (::sendmsg(s.get(), &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof header)) break;
    const int err = errno;
    if (!wouldBlock(err)) {
      if (err == EPIPE || err == ECONNRESET)
        fail(coilRemoteError, what, ": the mailbox closed the connection");
      failErrno(what + ": sendmsg", err);
    }
    waitSlice(s.get(), POLLOUT, deadline, abortFlag, check, what);
  }
  // The acknowledgement: the receiver has the descriptors.
  for (;;) {
    char ack = 0;
    const ssize_t n = ::recv(s.get(), &ack, 1, 0);
    if (n == 1) return;
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      if (secondLook(s.get(), &ack) == 1) return;
      fail(coilRemoteError, what, ": the mailbox closed before taking the message");
    }
    if (!wouldBlock(errno)) failErrno(what + ": waiting for the acknowledgement", errno);
    waitSlice(s.get(), POLLIN, deadline, abortFlag, check, what + " (waiting for its receipt)");
  }
}

FdMailbox::Message FdMailbox::take(int connection, const Deadline& deadline,
                                   const std::atomic<bool>* abortFlag, const Check& check) {
  const std::string what = "receiving descriptors at fd mailbox '" + name_ + "'";
  Header header{};
  iovec iov{&header, sizeof header};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxFds));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t n;
  for (;;) {
    n = ::recvmsg(connection, &msg, MSG_CMSG_CLOEXEC);
    if (n >= 0 || !wouldBlock(errno)) break;
    waitSlice(connection, POLLIN, deadline, abortFlag, check, what);
  }
  if (n == 0) {
    msg.msg_controllen = control.size();
    const ssize_t again = secondLook(connection, &msg);
    if (again > 0) n = again;
  }
  if (n < 0) failErrno(what + ": recvmsg", errno);
  // Whatever arrived is owned now, so that every error path closes it.
  Message m{header.tag, {}};
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      m.fds.emplace_back(fd);
    }
  }
  if (n == 0) fail(coilRemoteError, what, ": a sender closed its connection without a message");
  if (static_cast<size_t>(n) != sizeof header || header.magic != kMagic)
    fail(coilRemoteError, what, ": a message that is not coil's (", n, " bytes)");
  if (msg.msg_flags & MSG_CTRUNC)
    fail(coilSystemError, what, ": the descriptors were cut short (this process may be out of "
                                "file descriptors: ulimit -n)");
  if (m.fds.size() != header.count)
    fail(coilRemoteError, what, ": ", m.fds.size(), " descriptors arrived of ", header.count);
  const char ack = 1;
  // The sender waits for this byte; a sender gone by now is no loss to us.
  (void)::send(connection, &ack, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  return m;
}

std::vector<OwnedFd> FdMailbox::receive(uint64_t tag, const Deadline& deadline,
                                        const std::atomic<bool>* abortFlag, const Check& check) {
  const std::string what = "waiting for message " + std::to_string(tag) + " at fd mailbox '" +
                           name_ + "'";
  for (;;) {
    auto it = std::find_if(early_.begin(), early_.end(), [&](const Message& m) { return m.tag == tag; });
    if (it != early_.end()) {
      std::vector<OwnedFd> fds = std::move(it->fds);
      early_.erase(it);
      return fds;
    }
    const int c = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
      if (!wouldBlock(errno) && errno != ECONNABORTED) failErrno(what + ": accept", errno);
      waitSlice(listener_.get(), POLLIN, deadline, abortFlag, check, what);
      continue;
    }
    OwnedFd connection(c);
    // Abstract names are open to every user of this network namespace:
    // only this user's processes may hand us descriptors.
    ucred peer{};
    socklen_t peerLen = sizeof peer;
    if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &peer, &peerLen) != 0 || peer.uid != ::getuid())
      continue;
    Message m = take(connection.get(), deadline, abortFlag, check);
    if (m.tag == tag) return std::move(m.fds);
    early_.push_back(std::move(m));
  }
}

}  // namespace coil
