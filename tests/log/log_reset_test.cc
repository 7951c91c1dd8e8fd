// coilResetDebugInit (NCCL's ncclResetDebugInit): the COIL_DEBUG* variables
// are read again, so a process can turn logging on, off, or to a file after
// coil has started logging.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "child_run.h"
#include "coil.h"

namespace {

using coil_test::countLines;
using coil_test::runInChild;

// One rank on its own: init lines and nothing else.
int initOneRank() {
  coilComm_t comm;
  if (coilCommInitAll(&comm, 1, nullptr) != coilSuccess) return 10;
  return coilCommDestroy(comm) == coilSuccess ? 0 : 11;
}

TEST(ResetDebugInit, LevelSetAfterTheFirstLogLineTakesEffect) {
  const auto child = runInChild(
      {{"COIL_DEBUG", "WARN"}, {"COIL_DEBUG_SUBSYS", ""}, {"COIL_DEBUG_FILE", ""}}, [] {
        if (initOneRank() != 0) return 1;
        std::fputs("-- reset --\n", stderr);
        setenv("COIL_DEBUG", "INFO", 1);
        coilResetDebugInit();
        return initOneRank();
      });
  ASSERT_EQ(child.exitCode, 0) << child.stderrText;
  const size_t mark = child.stderrText.find("-- reset --");
  ASSERT_NE(mark, std::string::npos);
  EXPECT_EQ(countLines(child.stderrText.substr(0, mark), " coil INFO "), 0) << child.stderrText;
  EXPECT_GE(countLines(child.stderrText.substr(mark), " coil INFO INIT "), 1) << child.stderrText;
}

TEST(ResetDebugInit, TurnsLoggingOff) {
  const auto child = runInChild(
      {{"COIL_DEBUG", "INFO"}, {"COIL_DEBUG_SUBSYS", ""}, {"COIL_DEBUG_FILE", ""}}, [] {
        if (initOneRank() != 0) return 1;
        std::fputs("-- reset --\n", stderr);
        setenv("COIL_DEBUG", "WARN", 1);
        coilResetDebugInit();
        return initOneRank();
      });
  ASSERT_EQ(child.exitCode, 0) << child.stderrText;
  const size_t mark = child.stderrText.find("-- reset --");
  ASSERT_NE(mark, std::string::npos);
  EXPECT_GE(countLines(child.stderrText.substr(0, mark), " coil INFO INIT "), 1);
  EXPECT_EQ(countLines(child.stderrText.substr(mark), " coil "), 0) << child.stderrText;
}

TEST(ResetDebugInit, MovesLinesToANewDebugFile) {
  char dir[] = "/tmp/coil-logtest-dir-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/after-reset.log";
  const auto child = runInChild(
      {{"COIL_DEBUG", "INFO"}, {"COIL_DEBUG_SUBSYS", ""}, {"COIL_DEBUG_FILE", ""}}, [&] {
        if (initOneRank() != 0) return 1;
        std::fputs("-- reset --\n", stderr);
        setenv("COIL_DEBUG_FILE", path.c_str(), 1);
        coilResetDebugInit();
        return initOneRank();
      });
  std::ifstream in(path);
  std::stringstream file;
  file << in.rdbuf();
  std::remove(path.c_str());
  rmdir(dir);
  ASSERT_EQ(child.exitCode, 0) << child.stderrText;
  const size_t mark = child.stderrText.find("-- reset --");
  ASSERT_NE(mark, std::string::npos);
  EXPECT_GE(countLines(child.stderrText.substr(0, mark), " coil INFO INIT "), 1);
  EXPECT_EQ(countLines(child.stderrText.substr(mark), " coil "), 0) << child.stderrText;
  EXPECT_GE(countLines(file.str(), " coil INFO INIT "), 1) << file.str();
}

TEST(ResetDebugInit, TheSameDebugFileKeepsItsEarlierLines) {
  char dir[] = "/tmp/coil-logtest-dir-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/same.log";
  const auto child = runInChild(
      {{"COIL_DEBUG", "INFO"}, {"COIL_DEBUG_SUBSYS", ""}, {"COIL_DEBUG_FILE", path}}, [] {
        if (initOneRank() != 0) return 1;
        setenv("COIL_DEBUG_SUBSYS", "INIT,COLL", 1);  // only the subsystems change
        coilResetDebugInit();
        return initOneRank();
      });
  std::ifstream in(path);
  std::stringstream file;
  file << in.rdbuf();
  std::remove(path.c_str());
  rmdir(dir);
  ASSERT_EQ(child.exitCode, 0) << child.stderrText;
  // BOOT lines come from the first init only: reopening would have lost them.
  EXPECT_GE(countLines(file.str(), " coil INFO BOOT "), 1) << file.str();
  EXPECT_GE(countLines(file.str(), " coil INFO INIT "), 2) << file.str();
}

}  // namespace
