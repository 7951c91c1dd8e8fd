// COIL_BIND (topo/binding.h) with ranks as threads of this process over tcp,
// whose proxy threads are coil's own: with COIL_BIND=auto on a process
// restricted to CPU 1, every thread stays within {1}, the proxies say in
// the log that they bound themselves, and the application's threads (this
// one, the rank threads) keep their affinity; unset, no thread binds.
//
// With one NUMA node (the development VM) the binding equals the mask the
// proxies inherit, so the log lines are what shows that they bound
// themselves; which CPUs they choose on a two-node machine is
// tests/topo/placement_test.cc's (two_sockets.xml).
#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_name.h"
#include "harness/run_ranks.h"

namespace {

using coil::test::Launch;
using coil::test::runRanks;
using coil::test::ScopedEnv;

std::string cpusOfThisThread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) {
      if (!out.empty()) out += ',';
      out += std::to_string(c);
    }
  return out;
}

// Cpus_allowed_list of every thread of this process, by thread id.
std::vector<std::pair<std::string, std::string>> everyThreadsCpus() {
  std::vector<std::pair<std::string, std::string>> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream status(std::string("/proc/self/task/") + e->d_name + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Cpus_allowed_list:", 0) == 0)
        out.emplace_back(e->d_name, line.substr(line.find_first_not_of(" \t", 18)));
  }
  closedir(dir);
  return out;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Runs two tcp ranks as threads with the main thread on `cpus`, COIL_BIND
// as given and INIT's INFO lines in a file; returns the file's text.
// Inside, every thread's mask must be `expected`.
std::string runTwoTcpRanks(const std::vector<int>& cpus, const std::string& bind,
                           const std::string& expected) {
  cpu_set_t before, restricted;
  sched_getaffinity(0, sizeof before, &before);
  CPU_ZERO(&restricted);
  for (int c : cpus) CPU_SET(c, &restricted);
  EXPECT_EQ(sched_setaffinity(0, sizeof restricted, &restricted), 0);
  const std::string logPath = "/tmp/coil_bind_threads_test_" + std::to_string(getpid()) + ".log";
  unlink(logPath.c_str());
  {
    ScopedEnv bindEnv("COIL_BIND", bind);
    ScopedEnv level("COIL_DEBUG", "INFO");
    ScopedEnv subsys("COIL_DEBUG_SUBSYS", "INIT");
    ScopedEnv file("COIL_DEBUG_FILE", logPath);
    coilResetDebugInit();
    runRanks({2, Launch::Threads, "tcp"}, [&](coilComm_t comm, int rank) {
      // One all-reduce: both proxies have started and moved data.
      float x = 1.0f;
      ASSERT_EQ(coilAllReduce(&x, &x, 1, coilFloat32, coilSum, comm, nullptr), coilSuccess);
      EXPECT_EQ(x, 2.0f);
      EXPECT_EQ(cpusOfThisThread(), expected) << "rank " << rank << "'s own thread was moved";
      if (rank == 0) {
        const auto threads = everyThreadsCpus();
        EXPECT_GE(threads.size(), 5u) << "main, 2 rank threads and 2 tcp proxies at least";
        for (const auto& [tid, mask] : threads)
          EXPECT_EQ(mask, expected) << "thread " << tid << " is outside the process's CPUs";
      }
      // Rank 1 (and its proxy) stays until rank 0 has looked.
      ASSERT_EQ(coilAllReduce(&x, &x, 1, coilFloat32, coilSum, comm, nullptr), coilSuccess);
    });
  }
  coilResetDebugInit();
  EXPECT_EQ(cpusOfThisThread(), expected) << "the application's thread was moved";
  sched_setaffinity(0, sizeof before, &before);
  std::ifstream in(logPath);
  std::stringstream text;
  text << in.rdbuf();
  unlink(logPath.c_str());
  return text.str();
}

bool mayRunOnCpu1() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_ISSET(1, &set);
}

TEST(BindThreads, AutoBindsCoilsThreadsWithinTheProcessMask) {
  if (!mayRunOnCpu1()) GTEST_SKIP() << "this process may not run on CPU 1";
  const std::string log = runTwoTcpRanks({1}, "auto", "1");
  EXPECT_EQ(count(log, "COIL_BIND=auto: tcp proxy thread bound to CPUs 1 ("), 2u) << log;
  EXPECT_EQ(count(log, " topology: cpus 1, NUMA node "), 2u) << log;
  EXPECT_EQ(count(log, "; COIL_BIND=auto]"), 2u) << log;
}

TEST(BindThreads, UnsetBindsNothing) {
  if (!mayRunOnCpu1()) GTEST_SKIP() << "this process may not run on CPU 1";
  const std::string log = runTwoTcpRanks({1}, "", "1");
  EXPECT_EQ(count(log, "thread bound to"), 0u) << log;
  EXPECT_EQ(count(log, "; COIL_BIND=none]"), 2u) << log;
}

// Names are what `top -H`, gdb and py-spy show: "coil-tcp-r1" is rank 1's
// tcp proxy, told apart from the application's threads and from the other
// rank's when ranks are threads of one process.
TEST(ThreadNames, CoilsOwnThreadsSayWhatAndWhoseTheyAre) {
  runRanks({2, Launch::Threads, "tcp"}, [](coilComm_t comm, int rank) {
    float x = 1.0f;
    ASSERT_EQ(coilAllReduce(&x, &x, 1, coilFloat32, coilSum, comm, nullptr), coilSuccess);
    if (rank == 0) {
      std::vector<std::string> names;
      DIR* dir = opendir("/proc/self/task");
      ASSERT_NE(dir, nullptr);
      while (dirent* e = readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
        std::string name;
        std::getline(comm, name);
        names.push_back(name);
      }
      closedir(dir);
      for (const char* proxy : {"coil-tcp-r0", "coil-tcp-r1"})
        EXPECT_EQ(std::count(names.begin(), names.end(), proxy), 1) << proxy;
    }
    ASSERT_EQ(coilAllReduce(&x, &x, 1, coilFloat32, coilSum, comm, nullptr), coilSuccess);
  });
  EXPECT_EQ(coil::ownThreadName("cuda-proxy", -1), "coil-cuda-proxy");
  EXPECT_EQ(coil::ownThreadName("tcp", 123456), "coil-tcp-r12345");  // the kernel keeps 15
}

}  // namespace
