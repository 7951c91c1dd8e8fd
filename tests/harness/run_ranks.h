// One harness for every multi-rank test: runs the same body on N ranks, as
// threads of this process or as forked processes, over a chosen transport.
//
//   runRanks({4, Launch::Processes, "tcp"}, [](coilComm_t comm, int rank) { ... });
//
// The body uses ordinary gtest assertions. In process mode each child reports
// failure through its exit status (its gtest messages go to the shared
// stdout), and the parent turns a bad status, a crash or a hang into a test
// failure naming the rank. Ranks that must not create a communicator (fault
// tests) use runRanksRaw and do it themselves.
#pragma once

#include <chrono>
#include <functional>
#include <vector>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "coil.h"

namespace coil::test {

enum class Launch { Threads, Processes };

struct RankSetup {
  int nranks;
  Launch launch;
  std::string transport;  // "shm", "tcp", kTwoHosts, or "" (coil's own choice)
  int timeoutSeconds = 180;
};

/// The transports every collective test body runs over: shm and tcp, or
/// the comma list in COIL_TEST_TRANSPORTS (the rxe suite sets "ib", inside
/// a guest that has RDMA devices). Test names carry the transport, so a
/// gtest filter can pick one.
std::vector<std::string> testedTransports();

/// A RankSetup transport: the ranks as processes on two "hosts" of this
/// machine (COIL_HOSTID: ranks [0, n/2) on one, the rest on the other),
/// with coil's own choice per peer: shm inside each host, tcp across.
inline constexpr const char* kTwoHosts = "twohosts";
/// The host kTwoHosts puts `rank` of `nranks` on (0 or 1).
int hostOf(int rank, int nranks);
/// testedTransports(), and for processes kTwoHosts as well (unless
/// COIL_TEST_TRANSPORTS names the list).
std::vector<std::string> testedTransports(Launch launch);
/// False for kTwoHosts with fewer than 3 ranks: one rank a host is the tcp
/// setup again, one rank the shm one (the suites skip those).
bool joinsBothKinds(const std::string& transport, int nranks);
/// False when nranks is above COIL_TEST_MAX_RANKS (unset: every count is
/// tested). The sanitizer leg of tools/run-tests sets 7: its 8-rank
/// setups, 4 ranks a core on 2 cores under ASan, took a quarter of its
/// time (the leg took 483 s with them, 357 s without).
bool rankCountTested(int nranks);

std::ostream& operator<<(std::ostream& os, const RankSetup& s);
/// "tcp_procs_5" — for parametrized test names.
std::string paramName(const RankSetup& s);

using RankBody = std::function<void(coilComm_t comm, int rank)>;
using RawRankBody = std::function<void(const coilUniqueId& id, int rank)>;

/// Creates a communicator per rank (coilCommInitRank), runs body, destroys it.
void runRanks(const RankSetup& setup, const RankBody& body);
/// Like runRanks without creating communicators: body gets the unique id.
void runRanksRaw(const RankSetup& setup, const RawRankBody& body);

/// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  bool had_;
  std::string old_;
};

using Clock = std::chrono::steady_clock;
/// Seconds elapsed since `t` (fault tests bound how long a failure takes).
double secondsSince(Clock::time_point t);

/// Polls a non-blocking init or split until it is over, for at most
/// `seconds`: its outcome (coilInProgress if still joining then,
/// coilInternalError if coilCommGetAsyncError itself failed).
coilResult_t waitReady(coilComm_t comm, double seconds = 30);

/// Runs `call` on this thread while another thread waits `delayMs`, then
/// runs `interrupt` (an abort or revoke of the comm `call` blocks on).
/// Returns call's result and the milliseconds from the start of `interrupt`
/// to call's return (fault tests bound how fast an interrupt takes effect).
struct InterruptedCall {
  coilResult_t result;
  double msAfterInterrupt;
};
InterruptedCall callInterruptedAfter(int delayMs, const std::function<void()>& interrupt,
                                     const std::function<coilResult_t()>& call);

/// coilCommInitRankConfig with a timeout; a failure is a test failure and
/// returns nullptr.
coilComm_t initWithTimeout(const coilUniqueId& id, int n, int rank, int64_t timeoutMs);

/// Names of the /dev/shm entries coil created (for leak checks).
std::vector<std::string> coilShmEntries();

/// A gtest environment whose TearDown fails if coil left anything in
/// /dev/shm. Register it once per binary with AddGlobalTestEnvironment.
/// It judges only segments of this process and of the rank processes it
/// forked (runProcesses notes them; a test that forks ranks itself calls
/// noteForkedRank): meson runs other test binaries at the same time, and a
/// segment of a rank one of them killed a moment ago is theirs to check.
::testing::Environment* newShmLeakCheck();
/// Makes `pid`'s segments count in this binary's leak check.
void noteForkedRank(pid_t pid);

}  // namespace coil::test
