// Fault injection: kill -9 of a random rank at a random moment — inside
// coilCommInitRank or during the collectives after it — over shm and tcp,
// with 2 to 4 ranks. Every survivor must return an error (never success,
// never a hang) within 5 s of the kill, although its timeout is far longer,
// and nothing may be left in /dev/shm.
//
// The clock starts when the victim has joined the rendezvous (its own BOOT
// log says so): a rank that dies before it ever contacts the root cannot be
// told from one that starts late, by coil or by any launcher-less library,
// so the survivors rightly wait for their timeout then (bootstrap tests
// cover that message). From the join on, every moment of init counts.
//
//   COIL_FAULT_TRIALS=N   trials (default 50)
//   COIL_FAULT_SEED=S     first trial's seed (default 1); each trial prints
//                         its seed, rank count, transport, victim and delay,
//                         so a failure can be replayed alone.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness/run_ranks.h"
#include "launch/quiet_threads.h"

namespace coil::test {
namespace {

constexpr int kMaxRanks = 4;
constexpr double kDetectSeconds = 5.0;
constexpr int64_t kSurvivorTimeoutMs = 60'000;  // far beyond kDetectSeconds

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

// Written by the ranks, read by the parent: one page shared across fork.
struct Outcome {
  std::atomic<int64_t> errorNs[kMaxRanks];        // when the rank saw its error
  std::atomic<int> rc[kMaxRanks];
  char message[kMaxRanks][256];
};

struct Trial {
  unsigned seed;
  int nranks;
  std::string transport;
  int victim;
  int delayUs;  // after the victim joined the rendezvous
};

Trial makeTrial(unsigned seed) {
  std::mt19937 rng(seed);
  Trial t;
  t.seed = seed;
  t.nranks = 2 + static_cast<int>(rng() % 3);
  t.transport = rng() % 2 ? "tcp" : "shm";
  t.victim = static_cast<int>(rng() % static_cast<unsigned>(t.nranks));
  // Half the trials die inside init (which takes a few ms to tens of ms
  // here), the rest during the collectives after it.
  t.delayUs = rng() % 2 ? static_cast<int>(rng() % 20'000) : static_cast<int>(rng() % 300'000);
  return t;
}

std::string describe(const Trial& t) {
  return "seed " + std::to_string(t.seed) + ": " + std::to_string(t.nranks) + " ranks over " +
         t.transport + ", rank " + std::to_string(t.victim) + " killed " +
         std::to_string(t.delayUs / 1000.0) + " ms after it joined the rendezvous";
}

// A rank: init, then all-reduces of varying sizes until one fails.
[[noreturn]] void runRank(const coilUniqueId& id, int rank, const Trial& t, Outcome* out,
                          int logFd) {
  if (logFd >= 0) {
    // The victim's BOOT log (INFO, set for the whole test: coil reads it
    // once per process) goes to the parent, which waits for the join.
    dup2(logFd, STDERR_FILENO);
    close(logFd);
  }
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.timeoutMs = kSurvivorTimeoutMs;
  coilComm_t comm = nullptr;
  coilResult_t rc = coilCommInitRankConfig(&comm, t.nranks, id, rank, &config);
  std::vector<float> send(1 << 16, 1.0f), recv(1 << 16);
  for (size_t i = 0; rc == coilSuccess; ++i) {
    const size_t count = size_t{1} << (i % 17);  // 1 .. 64 Ki elements
    rc = coilAllReduce(send.data(), recv.data(), count, coilFloat, coilSum, comm, nullptr);
    if (rc == coilSuccess && recv[count - 1] != static_cast<float>(t.nranks)) {
      rc = coilInternalError;  // wrong data: report it as such
      std::snprintf(out->message[rank], sizeof out->message[rank], "wrong result %g",
                    static_cast<double>(recv[count - 1]));
      out->errorNs[rank] = nowNs();
      out->rc[rank] = rc;
      _exit(1);
    }
  }
  out->errorNs[rank] = nowNs();
  out->rc[rank] = rc;
  std::snprintf(out->message[rank], sizeof out->message[rank], "%s", coilGetLastError(comm));
  if (comm) coilCommDestroy(comm);
  _exit(0);
}

// Reads the victim's log until its bootstrap says it joined the root; the
// time of that line, or 0 at `giveUpNs`.
int64_t waitForJoin(int fd, int64_t giveUpNs) {
  std::string seen;
  char buf[4096];
  while (nowNs() < giveUpNs) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    const ssize_t k = read(fd, buf, sizeof buf);
    if (k <= 0) return 0;  // the victim exited (or failed) before joining
    seen.append(buf, static_cast<size_t>(k));
    if (seen.find("joined the rendezvous root") != std::string::npos) return nowNs();
  }
  return 0;
}

// Runs one trial; returns failures as text (empty: the trial passed).
std::string runTrial(const Trial& t) {
  auto* out = static_cast<Outcome*>(
      mmap(nullptr, sizeof(Outcome), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (out == MAP_FAILED) return "mmap failed";
  new (out) Outcome{};
  // Fork first, then make the id (no coil thread alive at fork time).
  std::vector<pid_t> pids;
  std::vector<int> idPipes;
  int victimLog[2];
  if (pipe(victimLog) != 0) return "pipe failed";
  std::fflush(nullptr);
  for (int r = 0; r < t.nranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) return "pipe failed";
    const pid_t pid = forkWhenQuiet();
    if (pid == 0) {
      for (int fd : idPipes) close(fd);
      close(fds[1]);
      close(victimLog[0]);
      if (r != t.victim) close(victimLog[1]);
      coilUniqueId id;
      if (read(fds[0], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(2);
      runRank(id, r, t, out, r == t.victim ? victimLog[1] : -1);
    }
    noteForkedRank(pid);
    close(fds[0]);
    idPipes.push_back(fds[1]);
    pids.push_back(pid);
  }
  close(victimLog[1]);
  coilUniqueId id;
  if (coilGetUniqueId(&id) != coilSuccess) return "coilGetUniqueId failed";
  for (int fd : idPipes) {
    if (write(fd, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) return "write failed";
    close(fd);
  }

  // Kill the victim delayUs after it joined the rendezvous.
  // (The log pipe stays open until the victim is dead: a victim writing to
  // a closed pipe would die of SIGPIPE at a moment of its own choosing.)
  const int64_t joined = waitForJoin(victimLog[0], nowNs() + 10'000'000'000LL);
  if (joined == 0) {
    close(victimLog[0]);
    return "the victim never joined the rendezvous";
  }
  while (nowNs() < joined + t.delayUs * 1000LL)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  kill(pids[t.victim], SIGKILL);
  const int64_t killedNs = nowNs();
  waitpid(pids[t.victim], nullptr, 0);
  close(victimLog[0]);

  // Every survivor must exit with its error well inside the bound.
  std::string failures;
  const int64_t giveUpNs = killedNs + static_cast<int64_t>((kDetectSeconds + 5) * 1e9);
  for (int r = 0; r < t.nranks; ++r) {
    if (r == t.victim) continue;
    int status = 0;
    while (waitpid(pids[r], &status, WNOHANG) == 0) {
      if (nowNs() > giveUpNs) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &status, 0);
        failures += " rank " + std::to_string(r) + " hung (no error " +
                    std::to_string(static_cast<int>(kDetectSeconds + 5)) + " s after the kill);";
        status = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (status == -1) continue;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures += " rank " + std::to_string(r) + " crashed or saw wrong data (status " +
                  std::to_string(status) + ": " + out->message[r] + ");";
      continue;
    }
    const double seconds = (out->errorNs[r].load() - killedNs) / 1e9;
    if (out->rc[r].load() == coilSuccess)
      failures += " rank " + std::to_string(r) + " returned success;";
    else if (seconds > kDetectSeconds)
      failures += " rank " + std::to_string(r) + " took " + std::to_string(seconds) +
                  " s to fail (" + coilGetErrorString(static_cast<coilResult_t>(out->rc[r].load())) +
                  ": " + out->message[r] + ");";
  }
  munmap(out, sizeof(Outcome));

  // Every rank of this trial is gone: a segment of its communicator (named
  // "coil-<nonce>-<pid of rank 0>-...") left now is this trial's leak. The
  // leak check at the end would catch it too, but could not name the seed.
  const std::string label = "-" + std::to_string(pids[0]) + "-";
  for (const std::string& name : coilShmEntries()) {
    const size_t nonceEnd = name.find('-', std::strlen("coil-"));
    if (nonceEnd != std::string::npos && name.compare(nonceEnd, label.size(), label) == 0)
      failures += " left /dev/shm/" + name + ";";
  }
  return failures;
}

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

TEST(KillRandomRank, EverySurvivorFailsWithinFiveSeconds) {
  const int trials = envInt("COIL_FAULT_TRIALS", 50);
  const unsigned firstSeed = static_cast<unsigned>(envInt("COIL_FAULT_SEED", 1));
  const char* ifname = std::getenv("COIL_SOCKET_IFNAME");
  ScopedEnv loopback("COIL_SOCKET_IFNAME", ifname ? ifname : "lo");
  // Before coil's first log call in this process: the children inherit it.
  ScopedEnv debug("COIL_DEBUG", "INFO");
  ScopedEnv subsystems("COIL_DEBUG_SUBSYS", "BOOT");
  int failed = 0;
  for (int i = 0; i < trials; ++i) {
    const Trial t = makeTrial(firstSeed + static_cast<unsigned>(i));
    ScopedEnv transport("COIL_TRANSPORT", t.transport);
    const std::string failures = runTrial(t);
    std::printf("%s: %s\n", describe(t).c_str(), failures.empty() ? "ok" : failures.c_str());
    std::fflush(stdout);
    if (!failures.empty()) {
      ++failed;
      ADD_FAILURE() << describe(t) << ":" << failures;
    }
  }
  std::printf("%d of %d trials failed\n", failed, trials);
}

// The moment right after the victim joined, in turn for each rank of 3 and
// over both transports: the others are between the rendezvous and the
// ring, where a rank that waits for its previous neighbour must still learn
// that a rank died (its next neighbour fails and closes the ring socket).
TEST(KillRandomRank, KilledRightAfterJoiningFailsEveryone) {
  const char* ifname = std::getenv("COIL_SOCKET_IFNAME");
  ScopedEnv loopback("COIL_SOCKET_IFNAME", ifname ? ifname : "lo");
  ScopedEnv debug("COIL_DEBUG", "INFO");
  ScopedEnv subsystems("COIL_DEBUG_SUBSYS", "BOOT");
  for (int rep = 0; rep < 2; ++rep)
    for (const char* transport : {"tcp", "shm"})
      for (int victim = 0; victim < 3; ++victim) {
        const Trial t{0, 3, transport, victim, 0};
        ScopedEnv forced("COIL_TRANSPORT", t.transport);
        const std::string failures = runTrial(t);
        EXPECT_TRUE(failures.empty()) << describe(t) << ":" << failures;
      }
}

// The victims never ran their destructors: the leak check at the end
// fails if a segment of theirs (or of any rank of a trial) is left.
[[maybe_unused]] auto* const kNoShmLeftBehind =
    ::testing::AddGlobalTestEnvironment(newShmLeakCheck());

}  // namespace
}  // namespace coil::test
