#include "harness/run_ranks.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace coil::test {

std::ostream& operator<<(std::ostream& os, const RankSetup& s) {
  return os << paramName(s);
}

std::vector<std::string> testedTransports() {
  std::vector<std::string> names;
  const char* list = std::getenv("COIL_TEST_TRANSPORTS");
  std::stringstream in(list != nullptr && *list != '\0' ? list : "shm,tcp");
  std::string name;
  while (std::getline(in, name, ','))
    if (!name.empty()) names.push_back(name);
  return names;
}

std::string paramName(const RankSetup& s) {
  return (s.transport.empty() ? std::string("auto") : s.transport) + "_" +
         (s.launch == Launch::Threads ? "threads" : "procs") + "_" + std::to_string(s.nranks);
}

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
  const char* old = std::getenv(name);
  had_ = old != nullptr;
  if (had_) old_ = old;
  if (value.empty()) unsetenv(name);
  else setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (had_) setenv(name_.c_str(), old_.c_str(), 1);
  else unsetenv(name_.c_str());
}

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

InterruptedCall callInterruptedAfter(int delayMs, const std::function<void()>& interrupt,
                                     const std::function<coilResult_t()>& call) {
  std::atomic<int64_t> interruptedAtNs{0};
  std::thread interrupter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    interruptedAtNs = Clock::now().time_since_epoch().count();
    interrupt();
  });
  const coilResult_t result = call();
  const int64_t returnedNs = Clock::now().time_since_epoch().count();
  interrupter.join();
  return {result, (returnedNs - interruptedAtNs.load()) / 1e6};
}

coilComm_t initWithTimeout(const coilUniqueId& id, int n, int rank, int64_t timeoutMs) {
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.timeoutMs = timeoutMs;
  coilComm_t comm = nullptr;
  EXPECT_EQ(coilCommInitRankConfig(&comm, n, id, rank, &config), coilSuccess)
      << coilGetLastError(nullptr);
  return comm;
}

std::vector<std::string> coilShmEntries() {
  std::vector<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind("coil-", 0) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

namespace {

// The pid in a segment's name: "coil-<nonce>-<pid of the communicator's
// rank 0>-<r|w><rank>"; 0 if the name has another shape.
pid_t labelPid(const std::string& name) {
  const size_t first = name.find('-'), second = name.find('-', first + 1);
  if (first == std::string::npos || second == std::string::npos) return 0;
  return static_cast<pid_t>(std::strtol(name.c_str() + second + 1, nullptr, 10));
}

// The rank processes this binary forked (noteForkedRank).
std::mutex forkedMutex;
std::set<pid_t> forkedRanks;

bool forkedHere(pid_t pid) {
  std::lock_guard<std::mutex> lock(forkedMutex);
  return forkedRanks.count(pid) != 0;
}

// A leak is a segment of this process (ranks as threads), or one whose
// communicator's rank 0 was a process forked here and no longer exists.
// Segments of other processes belong to test binaries that meson runs at
// the same time: they are theirs to check (one of them may have killed a
// rank a moment ago, whose survivors have not removed its segment yet).
class ShmLeakCheck : public ::testing::Environment {
 public:
  void TearDown() override {
    std::vector<std::string> left;
    for (const std::string& name : coilShmEntries()) {
      const pid_t pid = labelPid(name);
      const bool alive = pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
      if (pid == getpid() || (!alive && forkedHere(pid))) left.push_back(name);
    }
    EXPECT_TRUE(left.empty()) << left.size() << " leftover segment(s), e.g. /dev/shm/"
                              << (left.empty() ? "" : left.front());
  }
};

void runThreads(const RankSetup& setup, const RawRankBody& body) {
  coilUniqueId id;
  ASSERT_EQ(coilGetUniqueId(&id), coilSuccess) << coilGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < setup.nranks; ++r) threads.emplace_back([&, r] { body(id, r); });
  for (auto& t : threads) t.join();
}

// Reads the unique id the parent writes after forking; false on EOF.
bool readId(int fd, coilUniqueId* id) {
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(id);
  while (got < sizeof *id) {
    const ssize_t n = read(fd, bytes + got, sizeof *id - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// The ranks are forked before the parent creates the unique id, so no
// thread of this run (the rendezvous root that coilGetUniqueId starts) is
// alive at fork time; the id reaches each child through a pipe. coil holds
// its own locks across fork as well (core/fork_guard.h), but the C library
// and a sanitizer's allocator are not all fork-safe with threads running.
void runProcesses(const RankSetup& setup, const RawRankBody& body) {
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  std::vector<int> idPipes;
  for (int r = 0; r < setup.nranks; ++r) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0) << "pipe failed";
    pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      for (int other : idPipes) close(other);
      close(fds[1]);
      coilUniqueId id;
      if (!readId(fds[0], &id)) _exit(2);  // the parent could not make an id
      close(fds[0]);
      int status = 0;
      try {
        body(id, r);
        status = ::testing::Test::HasFailure() ? 1 : 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d threw: %s\n", r, e.what());
        status = 2;
      }
      std::fflush(nullptr);
      _exit(status);  // skip gtest's and the parent's atexit work
    }
    noteForkedRank(pid);
    close(fds[0]);
    idPipes.push_back(fds[1]);
    pids.push_back(pid);
  }
  coilUniqueId id;
  const bool haveId = coilGetUniqueId(&id) == coilSuccess;
  EXPECT_TRUE(haveId) << coilGetLastError(nullptr);
  for (int fd : idPipes) {
    if (haveId) {
      EXPECT_EQ(write(fd, &id, sizeof id), static_cast<ssize_t>(sizeof id));
    }
    close(fd);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(setup.timeoutSeconds);
  std::vector<int> status(pids.size(), -1);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (status[r] != -1) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = st;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t r = 0; r < pids.size(); ++r)
        if (status[r] == -1) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          ADD_FAILURE() << "rank " << r << " did not finish within " << setup.timeoutSeconds
                        << " s (killed)";
          status[r] = 0;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (size_t r = 0; r < pids.size(); ++r) {
    int st = status[r];
    if (WIFSIGNALED(st)) ADD_FAILURE() << "rank " << r << " died with signal " << WTERMSIG(st);
    else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
      ADD_FAILURE() << "rank " << r << " failed (exit status " << WEXITSTATUS(st) << ")";
  }
}

}  // namespace

::testing::Environment* newShmLeakCheck() { return new ShmLeakCheck; }

void noteForkedRank(pid_t pid) {
  std::lock_guard<std::mutex> lock(forkedMutex);
  forkedRanks.insert(pid);
}

void runRanksRaw(const RankSetup& setup, const RawRankBody& body) {
  // Tests talk over loopback only (unless the caller chose an interface).
  const char* ifname = std::getenv("COIL_SOCKET_IFNAME");
  ScopedEnv loopback("COIL_SOCKET_IFNAME", ifname ? ifname : "lo");
  ScopedEnv transport("COIL_TRANSPORT", setup.transport);
  if (setup.launch == Launch::Threads) runThreads(setup, body);
  else runProcesses(setup, body);
}

void runRanks(const RankSetup& setup, const RankBody& body) {
  runRanksRaw(setup, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = nullptr;
    coilResult_t rc = coilCommInitRank(&comm, setup.nranks, id, rank);
    ASSERT_EQ(rc, coilSuccess) << "rank " << rank << ": " << coilGetLastError(nullptr);
    body(comm, rank);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

}  // namespace coil::test
