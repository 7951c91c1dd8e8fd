// The COIL_DEBUG* parsing rules and COIL_DEBUG_FILE's name expansion, on
// their own (no environment, no files).
#include <gtest/gtest.h>

#include "core/log_file.h"
#include "core/log_settings.h"

namespace coil::log {
namespace {

TEST(LogSettings, DefaultSubsystemsLeaveOutPerCallLines) {
  const Settings s = parseSettings("INFO", nullptr, nullptr);
  EXPECT_EQ(s.level, Level::Info);
  for (unsigned on : {kInit, kBoot, kNet, kShm}) EXPECT_NE(s.mask & on, 0u) << on;
  EXPECT_EQ(s.mask & kColl, 0u);
  EXPECT_EQ(s.mask & kTune, 0u);
  EXPECT_TRUE(s.filePattern.empty());
}

TEST(LogSettings, NamedSubsystemsAllAndExclusion) {
  EXPECT_EQ(parseSettings("INFO", "COLL", nullptr).mask, unsigned{kColl});
  EXPECT_EQ(parseSettings("INFO", "coll,tune", nullptr).mask, unsigned{kColl | kTune});
  EXPECT_EQ(parseSettings("INFO", "ALL", nullptr).mask, unsigned{kAll});
  const unsigned notTune = parseSettings("INFO", "^TUNE", nullptr).mask;
  EXPECT_NE(notTune & kColl, 0u);
  EXPECT_EQ(notTune & kTune, 0u);
  EXPECT_EQ(parseSettings("INFO", "NOSUCH", nullptr).mask, 0u);
}

TEST(LogSettings, Levels) {
  EXPECT_EQ(parseSettings(nullptr, nullptr, nullptr).level, Level::Warn);
  EXPECT_EQ(parseSettings("trace", nullptr, nullptr).level, Level::Trace);
  EXPECT_EQ(parseSettings("NONE", nullptr, nullptr).level, Level::Error);
  EXPECT_EQ(parseSettings("bogus", nullptr, nullptr).level, Level::Warn);
  EXPECT_EQ(parseSettings(nullptr, nullptr, "/tmp/x-%p").filePattern, "/tmp/x-%p");
}

TEST(LogSettings, WarningsPrintWhateverTheSubsystemMask) {
  const Settings s = parseSettings("INFO", nullptr, nullptr);
  EXPECT_TRUE(shows(Level::Warn, kColl, s.level, s.mask)) << "e.g. the flight recorder's dump";
  EXPECT_TRUE(shows(Level::Error, kTune, s.level, s.mask));
  EXPECT_FALSE(shows(Level::Info, kColl, s.level, s.mask));
  EXPECT_TRUE(shows(Level::Info, kInit, s.level, s.mask));
  EXPECT_FALSE(shows(Level::Trace, kInit, s.level, s.mask)) << "above the level";
  EXPECT_TRUE(shows(Level::Warn, kColl, Level::Warn, parseSettings("WARN", "INIT", nullptr).mask));
  EXPECT_FALSE(shows(Level::Warn, kColl, Level::Error, kAll)) << "COIL_DEBUG=NONE";
}

TEST(LogFilePath, HostPidAndPercent) {
  EXPECT_EQ(expandLogPath("/tmp/coil-%h-%p.log", "node7", 4242), "/tmp/coil-node7-4242.log");
  EXPECT_EQ(expandLogPath("%p%p", "h", 1), "11");
  EXPECT_EQ(expandLogPath("100%%-%x-%", "h", 1), "100%-%x-%");
  EXPECT_EQ(expandLogPath("plain.log", "h", 1), "plain.log");
}

}  // namespace
}  // namespace coil::log
