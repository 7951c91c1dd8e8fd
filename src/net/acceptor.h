// The accepting side of authenticated connections, for many at once.
//
// A listener that accepts, authenticates and reads one connection at a time
// can be held up by a stranger that connects and stays silent. This one runs
// the server half of auth.h's handshake, and then reads a fixed-size first
// message ("hello"), for every pending connection in one poll() loop:
// a stranger costs one slot until its own handshake deadline, never the
// others' time. Strangers (failed proof, early close, garbage, silence) are
// logged as "refused connection from <addr>: <why>" and dropped; those
// warnings share one process-wide rate limit (logRefusedConnection).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "net/auth.h"
#include "net/socket.h"

namespace coil {

/// Logs "refused connection from <peer>: <why> (<context>)". Strangers
/// decide how often this runs, so every refusal in the process (acceptors,
/// and callers that refuse a hello they decoded) shares one limit: the
/// first kRefusalBurst lines per kRefusalInterval, then a summary line with
/// the count of those held back (log_rate.h).
void logRefusedConnection(const SocketAddress& peer, const std::string& why,
                          const std::string& context);
inline constexpr int kRefusalBurst = 10;
inline constexpr Clock::duration kRefusalInterval = std::chrono::seconds(10);

class AuthenticatedAcceptor {
 public:
  /// A connection that proved knowledge of the secret and sent its hello.
  struct Accepted {
    Socket socket;
    SocketAddress peer;
    std::vector<uint8_t> hello;  // exactly helloBytes
  };

  /// Time a connection gets from accept() to a complete hello.
  static constexpr int kDefaultHandshakeMs = 5000;
  /// Connections in the handshake at once; more wait in the listen backlog.
  static constexpr size_t kMaxPending = 1024;

  /// Borrows `listener` and `secret` (both must outlive this object).
  /// `purpose` is auth.h's purpose; `context` names this listener in the
  /// refusal warnings ("rendezvous root", "rank 3 ring listener").
  AuthenticatedAcceptor(Socket& listener, const uint8_t* secret, std::string purpose,
                        size_t helloBytes, std::string context,
                        int handshakeMs = kDefaultHandshakeMs);
  /// Drops connections still in their handshake, and writes the summary of
  /// refusals held back by the rate limit.
  ~AuthenticatedAcceptor();
  AuthenticatedAcceptor(const AuthenticatedAcceptor&) = delete;
  AuthenticatedAcceptor& operator=(const AuthenticatedAcceptor&) = delete;

  /// Returns the next connection that completed the handshake and its hello,
  /// or nullopt once `deadline` passes or `stop` (if given) returns true;
  /// stop is polled every kWaitSliceMs. Throws only on local failures
  /// (poll/accept errors), never because of what a peer did.
  std::optional<Accepted> next(const Deadline& deadline,
                               const std::function<bool()>& stop = nullptr);

 private:
  struct Pending {
    Socket socket;
    SocketAddress peer;
    uint8_t nonce[auth::kNonceBytes];
    bool authenticated = false;  // proof checked; now reading the hello
    std::vector<uint8_t> buffer;
    size_t have = 0;
    Clock::time_point expires;
    bool finished = false;  // handed to ready_ or refused
  };

  void acceptWaiting();
  void service(Pending& p);
  void refuse(Pending& p, const std::string& why);

  Socket& listener_;
  const uint8_t* secret_;
  std::string purpose_;
  size_t helloBytes_;
  std::string context_;
  int handshakeMs_;
  std::vector<Pending> pending_;
  std::deque<Accepted> ready_;
};

}  // namespace coil
