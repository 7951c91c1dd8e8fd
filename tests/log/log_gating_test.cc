// What COIL_DEBUG=INFO prints, through the public API only: init and
// per-peer lines, never a line per collective call unless COLL (or TUNE, or
// ALL) is asked for, as NCCL_DEBUG=INFO. And COIL_DEBUG_FILE's %h and %p.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_run.h"
#include "coil.h"

namespace {

using coil_test::countLines;
using coil_test::runInChild;

// Two ranks as threads; `calls` all-reduces of 256 floats on each.
int allReduces(int calls) {
  coilComm_t comms[2];
  if (coilCommInitAll(comms, 2, nullptr) != coilSuccess) return 10;
  int failures = 0;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      std::vector<float> x(256, 1.0f);
      for (int i = 0; i < calls; ++i)
        if (coilAllReduce(x.data(), x.data(), x.size(), coilFloat, coilSum, comms[r], nullptr) !=
            coilSuccess)
          ++failures;
    });
  }
  for (auto& t : ranks) t.join();
  for (auto c : comms) coilCommDestroy(c);
  return failures == 0 ? 0 : 11;
}

using Env = std::vector<std::pair<std::string, std::string>>;

Env infoWith(const std::string& subsystems) {
  return {{"COIL_DEBUG", "INFO"}, {"COIL_DEBUG_SUBSYS", subsystems}, {"COIL_DEBUG_FILE", ""},
          {"COIL_SOCKET_IFNAME", "lo"}};
}

TEST(LogGating, InfoPrintsInitLinesButNoLinePerCall) {
  const auto few = runInChild(infoWith(""), [] { return allReduces(2); });
  const auto many = runInChild(infoWith(""), [] { return allReduces(40); });
  ASSERT_EQ(few.exitCode, 0) << few.stderrText;
  ASSERT_EQ(many.exitCode, 0) << many.stderrText;
  EXPECT_GE(countLines(many.stderrText, " coil INFO INIT "), 2) << many.stderrText;
  EXPECT_EQ(countLines(many.stderrText, " coil INFO COLL "), 0) << many.stderrText;
  EXPECT_EQ(countLines(many.stderrText, " coil INFO TUNE "), 0) << many.stderrText;
  // 38 more calls, not one more line.
  EXPECT_EQ(countLines(many.stderrText, " coil "), countLines(few.stderrText, " coil "))
      << "2 calls:\n" << few.stderrText << "40 calls:\n" << many.stderrText;
}

TEST(LogGating, CollPrintsALinePerCall) {
  const auto coll = runInChild(infoWith("COLL"), [] { return allReduces(40); });
  ASSERT_EQ(coll.exitCode, 0) << coll.stderrText;
  // Every rank logs each of its 40 calls; nothing from other subsystems.
  EXPECT_GE(countLines(coll.stderrText, " coil INFO COLL "), 2 * 40);
  EXPECT_EQ(countLines(coll.stderrText, " coil INFO INIT "), 0) << coll.stderrText;
}

TEST(LogGating, AllPrintsInitAndPerCallLines) {
  const auto all = runInChild(infoWith("ALL"), [] { return allReduces(40); });
  ASSERT_EQ(all.exitCode, 0) << all.stderrText;
  EXPECT_GE(countLines(all.stderrText, " coil INFO COLL "), 2 * 40);
  EXPECT_GE(countLines(all.stderrText, " coil INFO TUNE "), 2 * 40);
  EXPECT_GE(countLines(all.stderrText, " coil INFO INIT "), 2);
}

TEST(LogFile, HostAndPidAreExpanded) {
  char dir[] = "/tmp/coil-logtest-dir-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string pattern = std::string(dir) + "/coil-%h-%p.log";
  const auto child = runInChild(
      {{"COIL_DEBUG", "INFO"}, {"COIL_DEBUG_SUBSYS", ""}, {"COIL_DEBUG_FILE", pattern},
       {"COIL_SOCKET_IFNAME", "lo"}},
      [] { return allReduces(1); });
  ASSERT_EQ(child.exitCode, 0) << child.stderrText;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string expected =
      std::string(dir) + "/coil-" + host + "-" + std::to_string(child.pid) + ".log";
  const auto file = runInChild({}, [&] {
    std::ifstream in(expected);
    std::stringstream text;
    text << in.rdbuf();
    std::fputs(text.str().c_str(), stderr);
    return in ? 0 : 1;
  });
  std::remove(expected.c_str());
  rmdir(dir);
  ASSERT_EQ(file.exitCode, 0) << expected << " was not written";
  EXPECT_GE(countLines(file.stderrText, " coil INFO INIT "), 2) << file.stderrText;
  // Every line went to the file, none to stderr.
  EXPECT_EQ(countLines(child.stderrText, " coil "), 0) << child.stderrText;
}

}  // namespace
