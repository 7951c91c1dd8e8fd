#include "harness/run_ranks.h"

#include <dirent.h>
#include <signal.h>
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

#include "launch/forked_ranks.h"

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

std::vector<std::string> testedTransports(Launch launch) {
  std::vector<std::string> names = testedTransports();
  if (launch == Launch::Processes && std::getenv("COIL_TEST_TRANSPORTS") == nullptr)
    names.push_back(kTwoHosts);
  return names;
}

bool joinsBothKinds(const std::string& transport, int nranks) {
  return transport != kTwoHosts || nranks >= 3;
}

bool rankCountTested(int nranks) {
  const char* most = std::getenv("COIL_TEST_MAX_RANKS");
  return most == nullptr || *most == '\0' || nranks <= std::atoi(most);
}

int hostOf(int rank, int nranks) { return nranks < 2 ? 0 : rank * 2 / nranks; }

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

coilResult_t waitReady(coilComm_t comm, double seconds) {
  coilResult_t state = coilInProgress;
  const auto t0 = Clock::now();
  while (state == coilInProgress && secondsSince(t0) < seconds) {
    if (coilCommGetAsyncError(comm, &state) != coilSuccess) return coilInternalError;
    if (state == coilInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
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

// A rank's process: its gtest failures leave through its exit status.
[[noreturn]] void runChild(ForkedRanks& forked, const RankSetup& setup, const RawRankBody& body) {
  coilUniqueId id;
  if (forked.receive(&id, sizeof id) != ForkedRanks::Handover::Received)
    ForkedRanks::exitChild(2);  // the parent could not make an id
  if (setup.transport == kTwoHosts)
    setenv("COIL_HOSTID", ("host" + std::to_string(hostOf(forked.rank(), setup.nranks))).c_str(), 1);
  int status = 0;
  try {
    body(id, forked.rank());
    status = ::testing::Test::HasFailure() ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d threw: %s\n", forked.rank(), e.what());
    status = 2;
  }
  ForkedRanks::exitChild(status);  // skip gtest's and the parent's atexit work
}

// The ranks are forked before the parent creates the unique id, so no
// thread of this run (the rendezvous root that coilGetUniqueId starts) is
// alive at fork time (launch/forked_ranks.h). coil holds its own locks across
// fork as well (core/fork_guard.h).
void runProcesses(const RankSetup& setup, const RawRankBody& body) {
  ForkedRanks forked(0, setup.nranks);
  if (forked.isChild()) runChild(forked, setup, body);
  for (pid_t pid : forked.pids()) noteForkedRank(pid);
  coilUniqueId id;
  if (coilGetUniqueId(&id) == coilSuccess) {
    forked.share(&id, sizeof id);
  } else {
    ADD_FAILURE() << coilGetLastError(nullptr);
    forked.abandon();
  }
  forked.reapAll(Clock::now() + std::chrono::seconds(setup.timeoutSeconds));
  for (const ForkedRank& c : forked.children()) {
    if (c.succeeded()) continue;
    if (c.overstayed) ADD_FAILURE() << c.describe() << "; the limit is " << setup.timeoutSeconds << " s";
    else ADD_FAILURE() << c.describe();
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
  // Two hosts: coil's own choice of transport per peer.
  ScopedEnv transport("COIL_TRANSPORT", setup.transport == kTwoHosts ? "" : setup.transport);
  if (setup.transport == kTwoHosts && setup.launch == Launch::Threads) {
    ADD_FAILURE() << kTwoHosts << " needs ranks as processes (COIL_HOSTID is per process)";
    return;
  }
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
