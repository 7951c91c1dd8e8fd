// Helpers shared by the bootstrap tests: environment save/restore, ranks as
// threads or forked processes, and the per-rank allGather pattern.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "launch/forked_ranks.h"

namespace coil::test {

/// Saves the named variables, unsets them, and restores them on scope exit.
class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::string> names) {
    for (const auto& n : names) {
      const char* v = std::getenv(n.c_str());
      saved_[n] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(n.c_str());
    }
  }
  ~EnvGuard() {
    for (const auto& [n, v] : saved_) {
      if (v) setenv(n.c_str(), v->c_str(), 1);
      else unsetenv(n.c_str());
    }
  }
  void set(const std::string& name, const std::string& value) {
    if (!saved_.count(name)) {
      const char* v = std::getenv(name.c_str());
      saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
    }
    setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

/// Variables that steer the bootstrap: tests start with none of them set so
/// that everything stays on 127.0.0.1. Without HOME (and COIL_SECRET_FILE) a
/// fixed root uses the derivable key, so tests never write a secret file
/// into the real home directory; tests of the file set HOME to a TempDir.
inline std::vector<std::string> bootstrapVars() {
  return {"COIL_SOCKET_IFNAME", "COIL_COMM_ID", "COIL_SECRET", "COIL_SECRET_FILE", "HOME",
          "COIL_TIMEOUT_MS"};
}

/// The message of the coil::Error that `f` throws, which must carry
/// `expectedCode`; a test failure (and "") if it throws none.
inline std::string messageOf(const std::function<void()>& f, coilResult_t expectedCode) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expectedCode) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

inline SocketAddress loopback(uint16_t port = 0) {
  return SocketAddress::parse("127.0.0.1:" + std::to_string(port));
}

/// What one rank's run ended with.
struct RankOutcome {
  bool ok = false;
  coilResult_t code = coilSuccess;
  std::string message;
  double seconds = 0;
};

/// Runs body(rank) for rank in [0, n) on n threads; returns each outcome.
inline std::vector<RankOutcome> runThreads(int n, const std::function<void(int)>& body) {
  std::vector<RankOutcome> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto start = std::chrono::steady_clock::now();
      RankOutcome& o = out[static_cast<size_t>(r)];
      try {
        body(r);
        o.ok = true;
      } catch (const Error& e) {
        o.code = e.code();
        o.message = e.what();
      } catch (const std::exception& e) {
        o.code = coilInternalError;
        o.message = std::string("std::exception: ") + e.what();
      }
      o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
  for (auto& t : threads) t.join();
  return out;
}

using ParentStep = std::function<void(const std::vector<pid_t>&)>;

namespace detail {

// rootTimeoutMs: start a root after the fork and share its id (without
// one, the children get no id).
inline std::vector<int> forkRanks(int n, std::optional<int64_t> rootTimeoutMs,
                                  const std::function<int(int, const UniqueIdData&)>& body,
                                  double timeoutSec, std::vector<pid_t>* pidsOut,
                                  const ParentStep& parent) {
  ForkedRanks forked(0, n);
  if (forked.isChild()) {
    int code = 91;
    try {
      UniqueIdData id;
      if (rootTimeoutMs && forked.receive(&id, sizeof id) != ForkedRanks::Handover::Received)
        fail(coilInternalError, "rank ", forked.rank(), " did not receive the unique id");
      code = body(forked.rank(), id);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d (pid %d) failed: %s\n", forked.rank(), (int)getpid(), e.what());
      code = 90;
    }
    ForkedRanks::exitChild(code);
  }
  if (rootTimeoutMs) {
    const UniqueIdData id = startRoot(loopback(), *rootTimeoutMs);
    forked.share(&id, sizeof id);
  } else {
    forked.abandon();  // nothing to hand over: the ranks know their id already
  }
  if (pidsOut) *pidsOut = forked.pids();
  if (parent) parent(forked.pids());
  forked.reapAll(ForkedRanks::Clock::now() +
                 std::chrono::duration_cast<ForkedRanks::Clock::duration>(
                     std::chrono::duration<double>(timeoutSec)));
  std::vector<int> status;
  for (const ForkedRank& c : forked.children()) status.push_back(c.status);
  return status;
}

}  // namespace detail

/// Forks one child per rank running body(rank) (launch/forked_ranks.h); a
/// child exits with what body returns (0: success), or 90 if it threw (the
/// message goes to stderr). Children never return into the test framework.
/// `parent`, if given, runs in the parent once the children exist. Returns
/// the wait statuses; children still running after timeoutSec are killed
/// (their status says SIGKILL).
inline std::vector<int> runProcesses(int n, const std::function<int(int)>& body,
                                     double timeoutSec = 20, std::vector<pid_t>* pidsOut = nullptr,
                                     const ParentStep& parent = nullptr) {
  return detail::forkRanks(
      n, std::nullopt, [&](int rank, const UniqueIdData&) { return body(rank); }, timeoutSec,
      pidsOut, parent);
}

/// As runProcesses, for ranks that meet at a rendezvous root this process
/// hosts: forks first, then starts the root (startRoot, `rootTimeoutMs`)
/// and hands every child its id. The root is a thread, and none may run
/// while the ranks are forked (launch/forked_ranks.h).
inline std::vector<int> runProcessesAroundRoot(
    int n, int64_t rootTimeoutMs, const std::function<int(int, const UniqueIdData&)>& body,
    double timeoutSec = 20, const ParentStep& parent = nullptr) {
  return detail::forkRanks(n, rootTimeoutMs, body, timeoutSec, nullptr, parent);
}

/// The byte rank `rank` contributes at offset i: differs across ranks and
/// positions, so a misplaced or stale block shows.
inline uint8_t patternByte(int rank, size_t i) {
  return static_cast<uint8_t>((rank * 131 + i * 7 + (i >> 8) * 13 + 1) & 0xff);
}

/// Fills this rank's block of an allGather buffer.
inline void fillOwnBlock(std::vector<uint8_t>& buf, int rank, size_t bytesPerRank) {
  for (size_t i = 0; i < bytesPerRank; ++i)
    buf[static_cast<size_t>(rank) * bytesPerRank + i] = patternByte(rank, i);
}

/// Index of the first wrong byte of a gathered buffer, or -1 if all right.
inline int64_t firstWrongByte(const std::vector<uint8_t>& buf, int nranks, size_t bytesPerRank) {
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < bytesPerRank; ++i)
      if (buf[static_cast<size_t>(r) * bytesPerRank + i] != patternByte(r, i))
        return static_cast<int64_t>(static_cast<size_t>(r) * bytesPerRank + i);
  return -1;
}

}  // namespace coil::test
