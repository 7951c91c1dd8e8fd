// Test harness for transports: N ranks as threads or forked processes, each
// with a real Bootstrap (root on 127.0.0.1, port 0) and a connected transport,
// running the same body. Bodies report failure by throwing (REQUIRE), which
// works the same in a thread and in a child process.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transports/transport.h"

namespace coil::transport::testing {

inline constexpr int64_t kTimeoutMs = 30000;
inline constexpr uint64_t kHostHash = 0x686f73742d746573ull;  // all ranks share this host

/// Throws std::runtime_error naming the file, line and condition.
#define REQUIRE(cond, msg)                                                                     \
  do {                                                                                         \
    if (!(cond))                                                                               \
      throw std::runtime_error(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " + \
                               #cond + ": " + (msg));                                          \
  } while (0)

/// Monotonic clock in nanoseconds (comparable across processes).
int64_t nowNs();
/// "Timeout", "PeerClosed", ...
const char* failureName(WaitFailure why);

// ---- data: an independent reference for every byte --------------------------
/// Fills `n` bytes with the pattern of message `k` from `src` to `dst`.
void fillPattern(uint8_t* p, uint32_t n, int src, int dst, uint32_t k);
/// The tag message `k` from `src` to `dst` carries.
uint64_t tagFor(int src, int dst, uint32_t k);
/// Size of message `k`: cycles through 0, 1, slotBytes-1, slotBytes, ... (<= slotBytes).
uint32_t messageBytes(uint32_t k, uint32_t slotBytes);

// ---- ranks ------------------------------------------------------------------
/// State all ranks share: plain memory for threads, a MAP_SHARED page for processes.
struct Shared {
  std::atomic<int> connected{0};    // ranks whose connect() returned
  std::atomic<int64_t> eventNs{0};  // when a close/kill happened (nowNs)
  std::atomic<bool> abortAll{false};
};

/// One rank: its bootstrap, transport and connections.
struct RankEnv {
  int rank = 0;
  int nranks = 0;
  Shared* shared = nullptr;
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<Transport> transport;
  std::vector<int> peers;                            // connected ranks
  std::vector<std::unique_ptr<Connection>> byPeer;  // index: peer rank (null if not connected)

  Connection& to(int peer) { return *byPeer[static_cast<size_t>(peer)]; }
  /// A watch with a deadline `ms` from now and the shared abort flag.
  WaitWatch watch(int64_t ms = kTimeoutMs) const;
  /// Communicator teardown order: transport shutdown, connections, transport, bootstrap.
  ~RankEnv();
};

using TransportMaker = std::function<std::unique_ptr<Transport>(int rank)>;
using RankBody = std::function<void(RankEnv&)>;
/// Which ranks `rank` connects to (must be symmetric across ranks).
using PeerSelector = std::function<std::vector<int>(int rank, int nranks)>;

/// createTransport(name) for every rank.
TransportMaker byName(const std::string& name);
/// Every other rank.
std::vector<int> allOthers(int rank, int nranks);
/// The registered transports among {"shm", "tcp"}.
std::vector<std::string> transportsUnderTest();
/// A rendezvous root on 127.0.0.1 (port 0).
UniqueIdData startLoopbackRoot();

/// Bootstrap, PeerInfo allGather and transport connect() for one rank;
/// checks what connect() returned.
std::unique_ptr<RankEnv> setUpRank(const UniqueIdData& id, int rank, int nranks, Shared* shared,
                                   const TransportMaker& make, const PeerSelector& select = allOthers);

/// Runs `body` on `n` ranks as threads; returns one error text per failed
/// rank (a failing rank sets the shared abort flag so the others stop waiting).
std::vector<std::string> runThreads(const UniqueIdData& id, int n, const TransportMaker& make,
                                    const RankBody& body, const PeerSelector& select = allOthers,
                                    Shared* shared = nullptr);

/// Runs `body` on `n` forked processes (the root starts after the fork, so the
/// children are single-threaded copies). `parent` runs meanwhile. Returns each
/// child's wait status, -1 if it had to be killed at the test deadline.
std::vector<int> runProcesses(int n, const TransportMaker& make, const RankBody& body,
                              const std::function<void(const std::vector<pid_t>&, Shared&)>& parent = {});

/// Newline-joined error texts.
std::string joined(const std::vector<std::string>& errors);
/// The processes of runProcesses' `status` that did not exit with 0, one
/// line each; empty when all did.
std::string failedProcesses(const std::vector<int>& status);

// ---- bodies -----------------------------------------------------------------
/// Sends `messages` pattern messages to `peer` (blocking acquire, kick()).
void sendStream(RankEnv& env, int peer, uint32_t messages);
/// Receives and checks `messages` from `peer`, stalling now and then so the
/// sender runs into a full FIFO.
void recvStream(RankEnv& env, int peer, uint32_t messages);
/// Every connected ordered pair streams `messages`, one sender and one
/// receiver thread per peer; ends with a barrier (nobody tears down early).
void streamAllPairs(RankEnv& env, uint32_t messages);

}  // namespace coil::transport::testing
