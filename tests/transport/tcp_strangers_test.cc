// A crowd of strangers on every port a tcp communicator listens on (the
// rendezvous root and each rank's data listener) must not slow its start:
// the listeners run every handshake at once, so a silent connection costs a
// slot until its own handshake deadline, never the real peers' time.
//
// The strangers connect before any real peer learns the port (inside the
// data listener's observer hook), so they sit first in the accept backlog:
// the worst case for a listener that handles one connection at a time.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/transport/rank_harness.h"
#include "transports/tcp/tcp_transport.h"

namespace coil::transport::testing {
namespace {

constexpr int kRanks = 3;
constexpr int kSilentPerPort = 200;
constexpr int kGarbagePerPort = 20;
// Ports crowded: the root and the data listeners of ranks 1 and 2.
constexpr int kPorts = 3;

/// Connections that never authenticate: silent ones, and ones that send
/// bytes that are no valid proof. Opened synchronously, so they are in the
/// listener's backlog when add() returns.
class Crowd {
 public:
  void add(const SocketAddress& addr, int silent, int garbage) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<Socket> opened;
    for (int i = 0; i < silent + garbage; ++i) {
      Socket s = Socket::connect(addr, Deadline::after(10000));
      if (i >= silent) {  // 64 bytes fit any socket buffer: sent before anyone reads
        const std::vector<uint8_t> junk(64, 0xab);
        s.sendAll(junk.data(), junk.size(), Deadline::after(10000));
      }
      opened.push_back(std::move(s));
    }
    std::lock_guard lock(mutex_);
    for (int i = 0; i < silent + garbage; ++i)
      (i < silent ? silent_ : garbage_).push_back(std::move(opened[static_cast<size_t>(i)]));
    connectSeconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  /// Time spent opening the connections, summed over every add().
  double connectSeconds() {
    std::lock_guard lock(mutex_);
    return connectSeconds_;
  }
  size_t silentCount() {
    std::lock_guard lock(mutex_);
    return silent_.size();
  }

 private:
  std::mutex mutex_;
  std::vector<Socket> silent_, garbage_;
  double connectSeconds_ = 0;
};

/// Allows the crowd's descriptors (both ends live in this process).
bool raiseFdLimit(rlim_t want) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  if (rl.rlim_cur >= want) return true;
  if (rl.rlim_max < want) return false;
  rl.rlim_cur = want;
  return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

struct InitRun {
  double seconds = 0;
  std::vector<std::string> errors;
};

/// Time for kRanks ranks (threads) to bootstrap and connect tcp, with
/// `crowd` (if any) on the root and on every data listener.
InitRun timeInit(Crowd* crowd) {
  const UniqueIdData id = startLoopbackRoot();
  const auto start = std::chrono::steady_clock::now();
  if (crowd != nullptr) crowd->add(id.root, kSilentPerPort, kGarbagePerPort);
  auto make = [crowd](int) {
    auto t = std::make_unique<tcp::TcpTransport>(tcp::TcpOptions{});
    if (crowd != nullptr)
      t->setListenerObserver([crowd](const SocketAddress& addr) {
        crowd->add(addr, kSilentPerPort, kGarbagePerPort);
      });
    return t;
  };
  InitRun run;
  run.errors = runThreads(id, kRanks, make, [](RankEnv&) {});
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

TEST(TcpStrangers, ACrowdOnEveryPortDoesNotSlowInit) {
  const rlim_t fds = 2 * kPorts * (kSilentPerPort + kGarbagePerPort) + 512;
  if (!raiseFdLimit(fds)) GTEST_SKIP() << "needs " << fds << " file descriptors (ulimit -n)";

  // The baseline: the better of two quiet runs (this box may be busy).
  InitRun quiet = timeInit(nullptr);
  ASSERT_TRUE(quiet.errors.empty()) << joined(quiet.errors);
  InitRun quiet2 = timeInit(nullptr);
  ASSERT_TRUE(quiet2.errors.empty()) << joined(quiet2.errors);
  const double baseline = std::min(quiet.seconds, quiet2.seconds);

  // The crowd's time to connect is counted too: a stricter bound.
  Crowd crowd;
  InitRun crowded = timeInit(&crowd);
  EXPECT_TRUE(crowded.errors.empty()) << joined(crowded.errors);
  EXPECT_EQ(crowd.silentCount(), static_cast<size_t>(kPorts * kSilentPerPort));
  std::printf("init of %d tcp ranks: %.3f s quiet, %.3f s with %d silent + %d garbage "
              "connections on each of %d ports (x%.2f; %.3f s of it opening them)\n",
              kRanks, baseline, crowded.seconds, kSilentPerPort, kGarbagePerPort, kPorts,
              crowded.seconds / baseline, crowd.connectSeconds());
  RecordProperty("quiet_ms", static_cast<int>(baseline * 1000));
  RecordProperty("crowded_ms", static_cast<int>(crowded.seconds * 1000));
  EXPECT_LT(crowded.seconds - baseline, 1.0)
      << "strangers slowed init from " << baseline << " s to " << crowded.seconds << " s";
}

}  // namespace
}  // namespace coil::transport::testing
