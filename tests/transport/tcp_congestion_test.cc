// COIL_TCP_CONGESTION: the name is checked where it is read (a clear error
// naming what the kernel has), and a communicator's data sockets, on the
// connecting and the accepting side, all carry it while the data flows.
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "tests/transport/rank_harness.h"
#include "transports/tcp/congestion_control.h"
#include "transports/tcp/tcp_transport.h"

namespace coil::transport::testing {
namespace {

// A congestion control other than the system's default, so that seeing it on
// a socket proves coil set it: reno (every kernel has it, and lets anyone
// choose it), or cubic where reno is the default.
std::string notTheDefault() {
  return tcp::systemCongestionControl() == "reno" ? "cubic" : "reno";
}

// How many of this process's TCP sockets use `name`.
int socketsUsing(const std::string& name) {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) throw std::runtime_error("cannot list /proc/self/fd");
  while (dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2 || fd == dirfd(dir)) continue;
    int type = 0;
    socklen_t length = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM) continue;
    if (tcp::congestionControlOf(fd) == name) ++count;
  }
  closedir(dir);
  return count;
}

TEST(TcpCongestion, UnknownOrMalformedNamesFailNamingWhatTheKernelHas) {
  try {
    tcp::checkCongestionControl("nosuchcontrol");
    FAIL() << "an unknown congestion control was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilInvalidUsage);
    const std::string what = e.what();
    EXPECT_NE(what.find("COIL_TCP_CONGESTION=nosuchcontrol"), std::string::npos) << what;
    EXPECT_NE(what.find("this kernel has: "), std::string::npos) << what;
    EXPECT_NE(what.find("reno"), std::string::npos) << "the list names reno: " << what;
  }
  for (const char* bad : {"", "Reno", "reno cubic", "a_name_longer_than_15"}) {
    try {
      tcp::checkCongestionControl(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), coilInvalidUsage) << bad;
    }
  }
  EXPECT_NO_THROW(tcp::checkCongestionControl("reno"));
}

TEST(TcpCongestion, ReadFromTheEnvironment) {
  setenv("COIL_TCP_CONGESTION", "reno", 1);
  EXPECT_EQ(tcp::TcpOptions::fromEnv().congestion, "reno");
  setenv("COIL_TCP_CONGESTION", "nosuchcontrol", 1);
  EXPECT_THROW(tcp::TcpOptions::fromEnv(), Error);
  unsetenv("COIL_TCP_CONGESTION");
  EXPECT_EQ(tcp::TcpOptions::fromEnv().congestion, "");
}

TEST(TcpCongestion, EveryDataSocketCarriesIt) {
  const std::string wanted = notTheDefault();
  try {
    tcp::checkCongestionControl(wanted);
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  const tcp::TcpOptions options{2, 2, 4096, wanted};
  auto make = [options](int) { return std::make_unique<tcp::TcpTransport>(options); };
  // Two processes: each sees only its own sockets, the nsocks FIFO sockets
  // and the express socket of its one connection (the bootstrap's keep the
  // system's default; the data listener is closed once connected).
  auto status = runProcesses(2, make, [wanted](RankEnv& env) {
    streamAllPairs(env, 20);
    const int found = socketsUsing(wanted);
    if (found != 3)
      throw std::runtime_error(std::to_string(found) + " sockets use " + wanted + ", expected 3");
    streamAllPairs(env, 20);
  });
  EXPECT_EQ(failedProcesses(status), "");
}

}  // namespace
}  // namespace coil::transport::testing
