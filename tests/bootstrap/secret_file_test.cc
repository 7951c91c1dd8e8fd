// The per-user secret file: created private, refused when it is not, and one
// file for every rank even when they all start at once.
#include "bootstrap/secret_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "temp_dir.h"
#include "test_util.h"

namespace coil {
namespace {

using test::messageOf;

void writeFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

size_t entriesIn(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(SecretFile, MissingIsNotAnError) {
  test::TempDir home;
  EXPECT_FALSE(readSecretFile(home / "secret").has_value());
}

TEST(SecretFile, CreatedPrivateWithRandomContent) {
  test::TempDir home;
  const std::string path = home / ".coil/secret";
  std::string s = readOrCreateSecretFile(path);
  EXPECT_EQ(test::modeOf(home / ".coil"), 0700);
  EXPECT_EQ(test::modeOf(path), 0600);
  ASSERT_EQ(s.size(), 64u);
  for (char c : s) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c))) << s;
  EXPECT_EQ(readOrCreateSecretFile(path), s) << "read back, not made again";
  EXPECT_EQ(entriesIn(home / ".coil"), 1u) << "no temporary file is left behind";

  test::TempDir other;
  EXPECT_NE(readOrCreateSecretFile(other / ".coil/secret"), s);
}

TEST(SecretFile, CreatingNeverReplacesAFile) {
  test::TempDir home;
  writeFile(home / "secret", "my own secret, long enough\n", 0600);
  createSecretFile(home / "secret");
  EXPECT_EQ(readSecretFile(home / "secret"), "my own secret, long enough");
}

TEST(SecretFile, AFileOthersCanReadOrWriteIsRefused) {
  test::TempDir home;
  const std::string path = home / "secret";
  for (mode_t mode : {0644, 0640, 0604, 0620, 0602, 0660}) {
    writeFile(path, "0123456789abcdef0123456789abcdef\n", mode);
    std::string m = messageOf([&] { readSecretFile(path); }, coilInvalidUsage);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find(octal), std::string::npos) << m;
    EXPECT_NE(m.find("chmod 600 " + path), std::string::npos) << m;
  }
  writeFile(path, "0123456789abcdef0123456789abcdef\n", 0400);
  EXPECT_TRUE(readSecretFile(path).has_value()) << "read-only for the owner is fine";
}

TEST(SecretFile, AFileOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file away";
  test::TempDir home;
  const std::string path = home / "secret";
  writeFile(path, "0123456789abcdef0123456789abcdef\n", 0600);
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  std::string m = messageOf([&] { readSecretFile(path); }, coilInvalidUsage);
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("uid 65534"), std::string::npos) << m;
}

TEST(SecretFile, NotARegularFileIsRefusedWithoutBlocking) {
  test::TempDir home;
  ASSERT_EQ(mkfifo((home / "fifo").c_str(), 0600), 0);  // an open for reading would block
  std::string m = messageOf([&] { readSecretFile(home / "fifo"); }, coilInvalidUsage);
  EXPECT_NE(m.find("not a regular file"), std::string::npos) << m;
  ASSERT_EQ(mkdir((home / "dir").c_str(), 0700), 0);
  m = messageOf([&] { readSecretFile(home / "dir"); }, coilInvalidUsage);
  EXPECT_NE(m.find("not a regular file"), std::string::npos) << m;
}

TEST(SecretFile, ContentIsTrimmedAndMustBeLongEnough) {
  test::TempDir home;
  const std::string path = home / "secret";
  writeFile(path, "sixteen bytes ok \r\n\n", 0600);
  EXPECT_EQ(readSecretFile(path), "sixteen bytes ok");
  writeFile(path, "short\n", 0600);
  std::string m = messageOf([&] { readSecretFile(path); }, coilInvalidUsage);
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("at least 16"), std::string::npos) << m;
  writeFile(path, "", 0600);
  messageOf([&] { readSecretFile(path); }, coilInvalidUsage);
  writeFile(path, std::string(kMaxSecretFileBytes + 1, 'x'), 0600);
  m = messageOf([&] { readSecretFile(path); }, coilInvalidUsage);
  EXPECT_NE(m.find("4096"), std::string::npos) << m;
}

TEST(SecretFile, ACreationThatCannotHappenNamesThePath) {
  test::TempDir home;
  const std::string path = home / "a/b/secret";  // only the last directory is made
  std::string m = messageOf([&] { createSecretFile(path); }, coilSystemError);
  EXPECT_NE(m.find(path), std::string::npos) << m;
}

TEST(SecretFile, RanksRacingToCreateItAgree) {
  constexpr int kRanks = 8;
  for (int trial = 0; trial < 5; ++trial) {
    test::TempDir home;
    const std::string path = home / ".coil/secret";
    // Every child blocks on `go` until the parent closes it, then races.
    int go[2], results[2];
    ASSERT_EQ(pipe(go), 0);
    ASSERT_EQ(pipe(results), 0);
    std::vector<int> status = test::runProcesses(
        kRanks,
        [&](int) {
          close(go[1]);
          char c;
          (void)!read(go[0], &c, 1);
          std::string s = readOrCreateSecretFile(path) + "\n";
          return write(results[1], s.data(), s.size()) == static_cast<ssize_t>(s.size()) ? 0 : 1;
        },
        20, nullptr, [&](const std::vector<pid_t>&) { close(go[1]); });
    close(go[0]);
    close(results[1]);
    for (int st : status) EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
    std::string all;
    char buf[512];
    for (ssize_t k; (k = read(results[0], buf, sizeof buf)) > 0;) all.append(buf, static_cast<size_t>(k));
    close(results[0]);
    std::set<std::string> distinct;
    size_t lines = 0;
    for (size_t at = 0, nl; (nl = all.find('\n', at)) != std::string::npos; at = nl + 1, ++lines)
      distinct.insert(all.substr(at, nl - at));
    EXPECT_EQ(lines, static_cast<size_t>(kRanks));
    EXPECT_EQ(distinct.size(), 1u) << all;
    EXPECT_EQ(entriesIn(home / ".coil"), 1u) << "no temporary file is left behind";
  }
}

}  // namespace
}  // namespace coil
