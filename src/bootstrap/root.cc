// The rendezvous root: a detached thread that collects every rank's hello
// and answers each with the table of all listener addresses.
//
// Handshakes of all pending connections run together in one poll() loop
// (acceptor.h), so a stranger that connects and stays silent, sends garbage
// or holds the wrong secret is refused without delaying the ranks.
//
// The root answers exactly once per joined rank:
//   - everyone joined and agreed      -> coilSuccess + address table;
//   - a conflict (nranks disagree, a rank twice, a rank out of range)
//                                     -> coilInvalidUsage + the reason, to
//     everyone joined so far; then it lingers briefly to give ranks still
//     arriving the same answer rather than a bare connection refusal;
//   - the deadline                    -> coilTimeout naming the missing ranks.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <cstring>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "net/acceptor.h"
#include "net/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "core/error.h"
#include "core/fork_guard.h"
#include "core/log.h"
#include "core/thread_name.h"

namespace coil {
namespace {

// How long a failed rendezvous keeps answering late ranks with its error.
constexpr int64_t kLingerAfterErrorMs = 3000;
// Longest the root waits for one rank to take its answer.
constexpr int64_t kReplySendMs = 10000;

// The roots this process hosts, by nonce, each with the flag withdrawRoot
// sets: coilCommInitRankScalable stops the roots of the ids it does not use.
class LocalRoots {
 public:
  LocalRoots() { guardAcrossFork(mutex_); }  // a root thread may hold it at a fork
  std::shared_ptr<std::atomic<bool>> add(uint64_t nonce) {
    auto flag = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard<std::mutex> lock(mutex_);
    roots_[nonce] = flag;
    return flag;
  }
  void remove(uint64_t nonce) {
    std::lock_guard<std::mutex> lock(mutex_);
    roots_.erase(nonce);
  }
  void withdraw(uint64_t nonce) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = roots_.find(nonce);
    if (it != roots_.end()) it->second->store(true);
  }

 private:
  std::mutex mutex_;
  std::map<uint64_t, std::shared_ptr<std::atomic<bool>>> roots_;
};

// Built at load and never destroyed: detached roots outlive main, and the
// root threads use it while the application may fork (core/log.cc says why
// that rules out a function-local static).
LocalRoots* const gLocalRoots = new LocalRoots;
LocalRoots& localRoots() { return *gLocalRoots; }

struct JoinedRank {
  Socket socket;
  SocketAddress from;
  wire::Hello hello;
};

// "rank 2", "ranks 2, 5-7"; ranks [0, nranks) absent from `present`.
std::string describeMissing(const std::vector<bool>& present) {
  std::string list;
  int count = 0;
  for (size_t r = 0; r < present.size();) {
    if (present[r]) {
      ++r;
      continue;
    }
    size_t end = r;
    while (end + 1 < present.size() && !present[end + 1]) ++end;
    if (!list.empty()) list += ", ";
    list += std::to_string(r);
    if (end > r) {
      list += '-';
      list += std::to_string(end);
    }
    count += static_cast<int>(end - r + 1);
    r = end + 1;
  }
  std::string text = count == 1 ? "rank " : "ranks ";
  text += list;
  return text;
}

class RendezvousRoot {
 public:
  RendezvousRoot(Socket listener, const UniqueIdData& id, int64_t timeoutMs)
      : listener_(std::move(listener)),
        id_(id),
        address_(id.root.toString()),
        deadline_(Deadline::after(timeoutMs)),
        withdrawn_(localRoots().add(id.nonce)) {}

  void run() noexcept {
    try {
      collectAndAnswer();
    } catch (const std::exception& e) {
      COIL_WARN(kBoot, "rendezvous root at ", address_, " failed: ", e.what());
    }
    localRoots().remove(id_.nonce);
  }

 private:
  void collectAndAnswer() {
    COIL_INFO(kBoot, "rendezvous root listening on ", address_,
              deadline_.totalMs() > 0 ? " for up to " + std::to_string(deadline_.totalMs()) + " ms"
                                      : std::string(" without deadline"));
    AuthenticatedAcceptor acceptor(listener_, id_.secret, "root", wire::kHelloBytes,
                                   "rendezvous root " + address_);
    int nranks = -1;  // set by the first rank to join
    // Withdrawn before anyone joined: no rank will come, and none waits.
    const auto withdrawn = [this] { return joined_.empty() && withdrawn_->load(); };
    while (nranks < 0 || static_cast<int>(joined_.size()) < nranks) {
      std::optional<AuthenticatedAcceptor::Accepted> a = acceptor.next(deadline_, withdrawn);
      if (!a && withdrawn()) {
        COIL_INFO(kBoot, "rendezvous root ", address_, " withdrawn: its ranks meet at another id");
        return;
      }
      if (!a) {
        answerTimeout(nranks);
        return;
      }
      wire::Hello hello;
      if (!wire::getHello(a->hello.data(), &hello)) {
        logRefusedConnection(a->peer, "malformed hello (a different coil version?)",
                             "rendezvous root " + address_);
        continue;
      }
      std::optional<std::string> conflict = checkConflict(hello, a->peer, nranks);
      maxClaimedRanks_ = std::max(maxClaimedRanks_, hello.nranks);
      joined_.push_back(JoinedRank{std::move(a->socket), a->peer, hello});
      if (conflict) {
        answerConflict(acceptor, *conflict);
        return;
      }
      if (nranks < 0) nranks = hello.nranks;
      COIL_INFO(kBoot, "rendezvous root ", address_, ": rank ", hello.rank, " joined from ",
                a->peer.toString(), " (", joined_.size(), " of ", nranks, ")");
    }
    answerTable(nranks);
  }

  // Why `h` cannot join the ranks already here (nullopt: it can).
  std::optional<std::string> checkConflict(const wire::Hello& h, const SocketAddress& from,
                                           int nranks) const {
    if (h.nranks < 1)
      return "rank " + std::to_string(h.rank) + " announced nranks=" + std::to_string(h.nranks);
    if (h.rank < 0 || h.rank >= h.nranks)
      return "rank " + std::to_string(h.rank) + " is out of range for nranks=" +
             std::to_string(h.nranks);
    if (nranks >= 0 && h.nranks != nranks)
      return "ranks disagree on nranks: rank " + std::to_string(h.rank) + " says " +
             std::to_string(h.nranks) + ", rank " + std::to_string(joined_.front().hello.rank) +
             " says " + std::to_string(nranks);
    for (const JoinedRank& j : joined_)
      if (j.hello.rank == h.rank)
        return "rank " + std::to_string(h.rank) + " joined twice (from " + j.from.toString() +
               " and " + from.toString() + ")";
    return std::nullopt;
  }

  void send(JoinedRank& j, coilResult_t code, const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> frame(wire::kReplyHeaderBytes + payload.size());
    wire::putReplyHeader(frame.data(), {static_cast<uint32_t>(code),
                                        static_cast<uint32_t>(payload.size())});
    std::memcpy(frame.data() + wire::kReplyHeaderBytes, payload.data(), payload.size());
    std::string peer = "rank " + std::to_string(j.hello.rank) + " (" + j.from.toString() + ")";
    try {
      j.socket.sendAll(frame.data(), frame.size(), Deadline::after(kReplySendMs), nullptr,
                       peer.c_str());
    } catch (const Error& e) {
      COIL_WARN(kBoot, "rendezvous root ", address_, ": could not answer ", peer, ": ",
                e.what());
    }
  }

  void answerAll(coilResult_t code, const std::string& message) {
    std::string text = message.substr(0, wire::kMaxErrorTextBytes);
    std::vector<uint8_t> payload(text.begin(), text.end());
    for (JoinedRank& j : joined_) send(j, code, payload);
  }

  void answerTable(int nranks) {
    std::vector<uint8_t> table(static_cast<size_t>(nranks) * wire::kAddressBytes);
    for (const JoinedRank& j : joined_)
      wire::putAddress(table.data() + static_cast<size_t>(j.hello.rank) * wire::kAddressBytes,
                       j.hello.listener);
    // Logged before the answers go out: once a rank has its table it may
    // finish init, change the log settings (coilResetDebugInit) or exit, and
    // a line from this detached thread must not land after that.
    COIL_INFO(kBoot, "rendezvous root ", address_, ": all ", nranks,
              " ranks joined; sending the address table");
    for (JoinedRank& j : joined_) send(j, coilSuccess, table);
  }

  void answerTimeout(int nranks) {
    std::string message;
    if (nranks < 0) {
      message = "no rank joined";
    } else {
      std::vector<bool> present(static_cast<size_t>(nranks), false);
      for (const JoinedRank& j : joined_) present[static_cast<size_t>(j.hello.rank)] = true;
      message = std::to_string(joined_.size()) + " of " + std::to_string(nranks) +
                " ranks joined; missing " + describeMissing(present);
    }
    message = "rendezvous root at " + address_ + " timed out after " +
              std::to_string(deadline_.totalMs()) + " ms: " + message;
    COIL_WARN(kBoot, message);
    answerAll(coilTimeout, message);
  }

  void answerConflict(AuthenticatedAcceptor& acceptor, const std::string& reason) {
    std::string message = "rendezvous at " + address_ + " failed: " + reason;
    COIL_WARN(kBoot, message);
    answerAll(coilInvalidUsage, message);
    // Ranks still on their way get the same answer, until as many as the
    // largest claimed nranks have been answered or the linger time is over.
    int answered = static_cast<int>(joined_.size());
    const int64_t lingerMs =
        deadline_.totalMs() > 0
            ? std::clamp<int64_t>(deadline_.remainingMs(), 1, kLingerAfterErrorMs)
            : kLingerAfterErrorMs;
    Deadline linger = Deadline::after(lingerMs);
    std::vector<uint8_t> payload(message.begin(), message.end());
    while (answered < maxClaimedRanks_) {
      std::optional<AuthenticatedAcceptor::Accepted> a = acceptor.next(linger);
      if (!a) break;
      JoinedRank late{std::move(a->socket), a->peer, {}};
      wire::getHello(a->hello.data(), &late.hello);
      send(late, coilInvalidUsage, payload);
      ++answered;
    }
  }

  Socket listener_;
  UniqueIdData id_;
  std::string address_;
  Deadline deadline_;
  std::vector<JoinedRank> joined_;
  int maxClaimedRanks_ = 0;
  std::shared_ptr<std::atomic<bool>> withdrawn_;
};

Socket listenForRoot(const SocketAddress& address) {
  try {
    return Socket::listen(address);
  } catch (const Error& e) {
    fail(coilSystemError, "cannot start the rendezvous root: ", e.what(),
         " (is another job using this address? choose another port)");
  }
}

void launch(Socket listener, const UniqueIdData& id, int64_t timeoutMs) {
  auto root = std::make_unique<RendezvousRoot>(std::move(listener), id, timeoutMs);
  try {
    std::thread thread([root = std::move(root)] { root->run(); });
    nameOwnThread(thread, "root", -1);
    thread.detach();
  } catch (const std::system_error& e) {
    fail(coilSystemError, "cannot start the rendezvous root thread: ", e.what());
  }
}

}  // namespace

UniqueIdData startRoot(const SocketAddress& bindAddress, int64_t timeoutMs) {
  UniqueIdData id;
  auth::randomBytes(id.secret, sizeof id.secret);
  auth::randomBytes(&id.nonce, sizeof id.nonce);
  id.rootHostedByRank0 = false;
  Socket listener = listenForRoot(bindAddress);
  id.root = listener.localAddress();
  launch(std::move(listener), id, timeoutMs);
  return id;
}

void startRootAt(const UniqueIdData& id, int64_t timeoutMs) {
  Socket listener;
  try {
    listener = Socket::listen(id.root);
  } catch (const Error& e) {
    // A fixed address comes from the launch's variables: say which, and
    // how to pick another.
    fail(coilSystemError, "cannot start the rendezvous root at the launch's fixed address: ",
         e.what(), " (the address is COIL_COMM_ID if set, else MASTER_ADDR:MASTER_PORT, or "
         "a port from TORCHELASTIC_RUN_ID and MASTER_PORT in 20000-31999 under torchrun "
         "without its agent store; under srun MASTER_ADDR and "
         "MASTER_PORT default to the step's first node and a port from SLURM_JOB_ID and "
         "SLURM_STEP_ID, under mpirun on one host to 127.0.0.1 and a port from Open MPI's job "
         "id; set COIL_COMM_ID=host:port or MASTER_PORT to a free port, or give torchrun "
         "another --master-port)");
  }
  launch(std::move(listener), id, timeoutMs);
}

void withdrawRoot(const UniqueIdData& id) { localRoots().withdraw(id.nonce); }

}  // namespace coil
