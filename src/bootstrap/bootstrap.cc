// Bootstrap::create: join the root's rendezvous, then connect the ring that
// allGather and barrier run on. The protocol is summarised in bootstrap.h;
// the root's side is root.cc.
#include "bootstrap/bootstrap.h"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "net/acceptor.h"
#include "net/auth.h"
#include "bootstrap/wire.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/printable.h"

namespace coil {
namespace {

// Extra time a rank waits for the root's answer past its own deadline: at
// the deadline the root reports which ranks never arrived, which says more
// than our own timeout could.
constexpr int64_t kRootAnswerGraceMs = 1000;
// Ring hello: the connecting rank's number (u32).
constexpr size_t kRingHelloBytes = 4;
// How long a ring neighbour may take to answer our handshake (see formRing).
constexpr int64_t kRingHandshakeMs = 2000;

bool isAborted(const std::atomic<bool>* flag) {
  return flag != nullptr && flag->load(std::memory_order_relaxed);
}

// Rethrows `e` with `context` in front of its message, keeping its code.
// The peer of `fd` shut its end or reset it (POLLRDHUP: even with bytes
// still queued). Non-blocking.
bool hungUp(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

[[noreturn]] void rethrowIn(const std::string& context, const Error& e) {
  throw Error(e.code(), context + e.what());
}

// The root's error text reaches coilGetLastError and logs, but another
// process wrote it: shown as printable ASCII, at most this long.
constexpr size_t kMaxRootTextChars = 512;

// Throws the error a root's failure answer stands for. A root gives two
// verdicts, each telling the user what to fix: coilInvalidUsage (the ranks
// disagree) and coilTimeout (ranks missing). Any other code is not a root's
// to give (another coil version, or not a coil root at all), and passing it
// on would have callers act on it (coilInProgress would make a failed
// blocking init look pending), so it becomes coilRemoteError naming it.
[[noreturn]] void failFromRootAnswer(const std::string& who, const std::string& rootName,
                                     uint32_t code, const std::vector<uint8_t>& text) {
  const std::string reason = printableText(text.data(), text.size(), kMaxRootTextChars);
  if (code == coilInvalidUsage || code == coilTimeout)
    fail(static_cast<coilResult_t>(code), who, reason);
  fail(coilRemoteError, who, rootName, " ended the rendezvous with unexpected result code ", code,
       ": ", reason);
}

std::string rankName(int rank, const SocketAddress& address) {
  return "rank " + std::to_string(rank) + " (" + address.toString() + ")";
}

Deadline extendedBy(const Deadline& deadline, int64_t ms) {
  if (deadline.totalMs() <= 0) return Deadline::never();
  return Deadline::after(deadline.remainingMs() + ms);
}

class RingBootstrap final : public Bootstrap {
 public:
  RingBootstrap(const UniqueIdData& id, int rank, int nranks, const Deadline& deadline,
                const std::atomic<bool>* abortFlag)
      : rank_(rank),
        nranks_(nranks),
        abortFlag_(abortFlag),
        opTimeoutMs_(deadline.totalMs()),
        who_("bootstrap of rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
             ": ") {
    std::memcpy(secret_, id.secret, sizeof secret_);
  }

  ~RingBootstrap() override { close(); }

  void join(const UniqueIdData& id, const Deadline& deadline) {
    Socket listener;
    std::vector<SocketAddress> table = rendezvous(id, deadline, &listener);
    if (nranks_ > 1) formRing(listener, table, deadline);
    listeners_ = std::move(table);
    COIL_INFO(kBoot, who_, "ready", nranks_ > 1 ? "; ring connected: next " + nextName_ +
                                                      ", previous " + prevName_
                                                : std::string(" (single rank, no ring)"));
  }

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const uint8_t* secret() const override { return secret_; }
  SocketAddress localAddress() const override { return local_; }
  SocketAddress listenerOf(int rank) const override {
    return listeners_.at(static_cast<size_t>(rank));
  }
  void setDeadline(const Deadline& deadline) override {
    explicitDeadline_ = deadline;
    hasExplicitDeadline_ = true;
  }

  void allGather(void* data, size_t bytesPerRank) override {
    if (closed_.load()) fail(coilRemoteError, who_, "allGather on a closed bootstrap");
    if (nranks_ == 1 || bytesPerRank == 0) return;
    const Deadline deadline = operationDeadline();
    auto* blocks = static_cast<uint8_t*>(data);
    try {
      // Step s: pass on the block received s steps ago (our own at s = 0).
      for (int step = 0; step < nranks_ - 1; ++step) {
        size_t sendBlock = static_cast<size_t>((rank_ - step + nranks_) % nranks_);
        size_t recvBlock = static_cast<size_t>((rank_ - step - 1 + nranks_) % nranks_);
        sendRecvAll(next_, blocks + sendBlock * bytesPerRank, bytesPerRank, prev_,
                    blocks + recvBlock * bytesPerRank, bytesPerRank, deadline, abortFlag_,
                    nextName_.c_str(), prevName_.c_str(),
                    // Before the last step, next still needs our blocks: it
                    // cannot have finished, so its close means it failed.
                    step < nranks_ - 2 ? WatchTo::kNoticeOrClose : WatchTo::kNotice);
      }
    } catch (const Error& e) {
      bool closedByUs = closed_.load();
      // Close so that our neighbours fail now too, and theirs after them.
      abandon();
      if (closedByUs) fail(coilRemoteError, who_, "bootstrap closed during allGather");
      rethrowIn(who_ + "allGather: ", e);
    }
  }

  void barrier() override {
    std::vector<uint8_t> flags(static_cast<size_t>(nranks_), 1);
    allGather(flags.data(), 1);
  }

  void checkRing() const override {
    if (nranks_ == 1 || closed_.load()) return;
    if (hungUp(prev_.fd()))
      fail(coilRemoteError, who_, prevName_, " closed its bootstrap connection: it exited or failed");
    if (hungUp(next_.fd()))
      fail(coilRemoteError, who_, nextName_, " closed its bootstrap connection: it exited or failed");
  }

  void abandon() noexcept override {
    if (!closed_.load() && prev_.valid()) {
      const uint8_t notice = 0xEE;
      (void)::send(prev_.fd(), &notice, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    close();
  }

  void close() noexcept override {
    closed_.store(true);
    next_.shutdownBoth();
    prev_.shutdownBoth();
  }

 private:
  Deadline operationDeadline() const {
    return hasExplicitDeadline_ ? explicitDeadline_ : Deadline::after(opTimeoutMs_);
  }

  // Steps 1-3: listener, root, address table. Leaves the listener open in
  // *listener for formRing.
  std::vector<SocketAddress> rendezvous(const UniqueIdData& id, const Deadline& deadline,
                                        Socket* listener) {
    const std::string rootName = "the rendezvous root at " + id.root.toString();
    Socket root;
    try {
      COIL_INFO(kBoot, who_, "connecting to ", rootName);
      // coilGetUniqueId's root listened before the id existed: a refusal
      // means it is gone, and waiting for the deadline would not bring it
      // back. A fixed root (rank 0 starts it) may simply not be up yet.
      root = Socket::connect(id.root, deadline, abortFlag_,
                             id.rootHostedByRank0 ? Socket::Refused::kRetry
                                                  : Socket::Refused::kFinal);
    } catch (const Error& e) {
      if (e.code() == coilRemoteError && !id.rootHostedByRank0)
        rethrowIn(who_ + "cannot reach " + rootName + " (the process that made this id with "
                  "coilGetUniqueId exited, its root stopped waiting after its timeout, or the id "
                  "is left from an earlier run): ", e);
      rethrowIn(who_ + "cannot reach " + rootName + ": ", e);
    }

    // Listen where we route to the root from, unless told an interface.
    if (auto ifname = env::get("COIL_SOCKET_IFNAME"))
      local_ = SocketAddress::ofInterface(*ifname);
    else
      local_ = root.localAddress();
    local_.setPort(0);
    *listener = Socket::listen(local_);
    wire::Hello hello;
    hello.rank = rank_;
    hello.nranks = nranks_;
    hello.listener = listener->localAddress();

    wire::ReplyHeader header;
    std::vector<uint8_t> payload;
    try {
      auth::proveAsClient(root, id.secret, "root", deadline, abortFlag_);
      uint8_t helloBytes[wire::kHelloBytes];
      wire::putHello(helloBytes, hello);
      root.sendAll(helloBytes, sizeof helloBytes, deadline, abortFlag_, rootName.c_str());
      COIL_INFO(kBoot, who_, "joined ", rootName, "; listening on ",
                hello.listener.toString());

      const Deadline answerDeadline = extendedBy(deadline, kRootAnswerGraceMs);
      uint8_t headerBytes[wire::kReplyHeaderBytes];
      root.recvAll(headerBytes, sizeof headerBytes, answerDeadline, abortFlag_, rootName.c_str());
      if (!wire::getReplyHeader(headerBytes, &header) ||
          !wire::replyFits(header, static_cast<size_t>(nranks_)))
        fail(coilRemoteError, rootName, " sent a malformed answer");
      payload.resize(header.length);
      root.recvAll(payload.data(), payload.size(), answerDeadline, abortFlag_,
                   rootName.c_str());
    } catch (const Error& e) {
      rethrowIn(who_ + "rendezvous with " + rootName + ": ", e);
    }
    if (header.code != coilSuccess) failFromRootAnswer(who_, rootName, header.code, payload);

    std::vector<SocketAddress> table(static_cast<size_t>(nranks_));
    for (size_t r = 0; r < table.size(); ++r)
      if (!wire::getAddress(payload.data() + r * wire::kAddressBytes, &table[r]))
        fail(coilRemoteError, who_, rootName, " sent a malformed address for rank ", r);
    COIL_INFO(kBoot, who_, "received the addresses of all ", nranks_, " ranks");
    return table;
  }

  // Step 4: connect to rank+1 while accepting rank-1. Both sides run at
  // once (the accepting side on a helper thread): done one after the other
  // on every rank, each rank's connect would wait for its successor's
  // accept, around the whole ring.
  void formRing(Socket& listener, const std::vector<SocketAddress>& table,
                const Deadline& deadline) {
    const int next = (rank_ + 1) % nranks_;
    const int prev = (rank_ - 1 + nranks_) % nranks_;
    nextName_ = rankName(next, table[static_cast<size_t>(next)]);
    prevName_ = rankName(prev, table[static_cast<size_t>(prev)]);

    std::atomic<bool> stop{false};
    // Once connected to next: its fd, watched while we wait for prev. A
    // next that fails (say, its own next died during init) closes the ring
    // socket; without the watch this rank would wait for its deadline.
    std::atomic<int> nextFd{-1};
    Socket accepted;
    std::exception_ptr acceptError;
    std::thread acceptThread([&] {
      log::setThreadRank(rank_);
      try {
        accepted = acceptPrevious(listener, prev, deadline, stop, nextFd);
      } catch (...) {
        acceptError = std::current_exception();
      }
    });

    try {
      // Every rank listens before it joins the root: a refusal means death.
      next_ = Socket::connect(table[static_cast<size_t>(next)], deadline, abortFlag_,
                              Socket::Refused::kFinal);
      // A rank accepts its previous neighbour as soon as it has the table,
      // which all ranks get at once, and answers in milliseconds; a port
      // that accepts and stays silent for this long is not it (it died, and
      // another process holds the port), and the survivors must learn of a
      // death within seconds.
      const Deadline handshake =
          Deadline::after(std::min<int64_t>(deadline.remainingMs(), kRingHandshakeMs));
      try {
        auth::proveAsClient(next_, secret_, "ring", handshake, abortFlag_);
      } catch (const Error& e) {
        if (e.code() != coilTimeout || deadline.expired()) throw;
        fail(coilRemoteError, nextName_, " accepted the ring connection but did not answer the "
             "handshake within ", handshake.totalMs(), " ms: it died and another process holds "
             "its port, or it is stuck");
      }
      uint8_t hello[kRingHelloBytes];
      wire::putU32(hello, static_cast<uint32_t>(rank_));
      next_.sendAll(hello, sizeof hello, deadline, abortFlag_, nextName_.c_str());
      nextFd.store(next_.fd());
    } catch (const Error& e) {
      stop.store(true);
      acceptThread.join();
      rethrowIn(who_ + "connecting the ring to " + nextName_ + ": ", e);
    } catch (...) {
      stop.store(true);
      acceptThread.join();
      throw;
    }
    acceptThread.join();
    if (acceptError) std::rethrow_exception(acceptError);
    prev_ = std::move(accepted);
  }

  Socket acceptPrevious(Socket& listener, int prev, const Deadline& deadline,
                        const std::atomic<bool>& stop, const std::atomic<int>& nextFd) {
    AuthenticatedAcceptor acceptor(listener, secret_, "ring", kRingHelloBytes,
                                   "ring listener of rank " + std::to_string(rank_));
    for (;;) {
      bool nextGone = false;
      auto a = acceptor.next(deadline, [&] {
        const int fd = nextFd.load();
        nextGone = fd >= 0 && hungUp(fd);
        return stop.load() || isAborted(abortFlag_) || nextGone;
      });
      if (!a) {
        if (stop.load()) return Socket();
        if (nextGone)
          fail(coilRemoteError, who_, nextName_, " closed the ring while this rank waited for ",
               prevName_, " to connect: a rank failed or died during init");
        if (isAborted(abortFlag_))
          fail(coilRemoteError, who_, "aborted while waiting for ", prevName_,
               " to connect the ring");
        fail(coilTimeout, who_, "timed out after ", deadline.totalMs(), " ms waiting for ",
             prevName_, " to connect the ring");
      }
      int announced = static_cast<int>(wire::getU32(a->hello.data()));
      if (announced != prev) {
        logRefusedConnection(a->peer,
                             "announced rank " + std::to_string(announced) + ", expected rank " +
                                 std::to_string(prev),
                             "ring listener of rank " + std::to_string(rank_));
        continue;
      }
      return std::move(a->socket);
    }
  }

  const int rank_;
  const int nranks_;
  const std::atomic<bool>* abortFlag_;
  const int64_t opTimeoutMs_;
  const std::string who_;  // "bootstrap of rank r of n: ", prefix of messages
  uint8_t secret_[auth::kSecretBytes];
  SocketAddress local_;
  Socket next_, prev_;
  std::string nextName_, prevName_;
  std::vector<SocketAddress> listeners_;  // every rank's ring listener (the root's table)
  Deadline explicitDeadline_;
  bool hasExplicitDeadline_ = false;
  std::atomic<bool> closed_{false};
};

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::create(const UniqueIdData& id, int rank, int nranks,
                                             const Deadline& deadline,
                                             const std::atomic<bool>* abortFlag) {
  if (nranks < 1) fail(coilInvalidArgument, "Bootstrap::create: nranks=", nranks, " is not >= 1");
  if (rank < 0 || rank >= nranks)
    fail(coilInvalidArgument, "Bootstrap::create: rank ", rank, " is out of range for nranks=",
         nranks);
  if (id.rootHostedByRank0 && rank == 0) {
    int64_t rootMs = deadline.totalMs() > 0 ? std::max(1, deadline.remainingMs()) : 0;
    startRootAt(id, rootMs);
  }
  auto bootstrap = std::make_unique<RingBootstrap>(id, rank, nranks, deadline, abortFlag);
  try {
    bootstrap->join(id, deadline);
  } catch (...) {
    bootstrap->abandon();  // a ring neighbour already connected learns at once
    throw;
  }
  return bootstrap;
}

}  // namespace coil
