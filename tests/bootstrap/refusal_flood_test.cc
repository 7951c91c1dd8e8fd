// A flood of strangers must not become a flood of log lines: thousands of
// garbage connections to a rendezvous root leave a bounded number of
// "refused connection" warnings, and summary lines account for every
// refusal that was not printed.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "test_util.h"

namespace coil {
namespace {

constexpr int kStrangers = 5000;
constexpr int kBatch = 100;
// The refusal limit lets 10 lines through per 10 s, plus one summary per
// interval; the flood takes well under a minute.
constexpr int kMaxLines = 100;

/// Sends this process's stderr (where coil logs) to a file while alive.
class StderrCapture {
 public:
  StderrCapture() {
    char name[] = "/tmp/coil-refusal-flood-XXXXXX";
    fd_ = mkstemp(name);
    path_ = name;
    std::fflush(stderr);
    saved_ = dup(2);
    dup2(fd_, 2);
  }
  ~StderrCapture() {
    restore();
    ::close(fd_);
    std::remove(path_.c_str());
  }
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  int fd_ = -1;
  int saved_ = -1;
  std::string path_;
};

struct Tally {
  int lines = 0;             // "refused connection" lines
  long long suppressed = 0;  // summed over the summary lines
  int summaries = 0;
};

Tally tally(const std::string& log) {
  static const std::regex summary("([0-9]+) more refused connections? suppressed");
  Tally t;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, summary)) {
      ++t.summaries;
      t.suppressed += std::stoll(m[1]);
    } else if (line.find("refused connection from") != std::string::npos) {
      ++t.lines;
    }
  }
  return t;
}

/// Opens `count` connections that send bytes that are no valid proof, in
/// batches, each time waiting until the listener has dropped every one.
void flood(const SocketAddress& at, int count) {
  const std::vector<uint8_t> junk(64, 0x5a);
  for (int done = 0; done < count; done += kBatch) {
    std::vector<Socket> batch;
    for (int i = 0; i < kBatch && done + i < count; ++i) {
      batch.push_back(Socket::connect(at, Deadline::after(10000)));
      batch.back().sendAll(junk.data(), junk.size(), Deadline::after(10000));
    }
    for (Socket& s : batch) {
      uint8_t buf[64];
      try {
        for (;;) s.recvAll(buf, sizeof buf, Deadline::after(10000), nullptr, "root");
      } catch (const Error& e) {
        ASSERT_EQ(e.code(), coilRemoteError) << "a garbage sender was not dropped: " << e.what();
      }
    }
  }
}

TEST(RefusalFlood, WarningsAreRateLimitedAndAccountedFor) {
  test::EnvGuard env(test::bootstrapVars());
  UniqueIdData id = startRoot(test::loopback(), 120000);
  StderrCapture capture;
  const auto start = std::chrono::steady_clock::now();
  flood(id.root, kStrangers);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // A one-rank rendezvous ends the root, which reports what it held back.
  Bootstrap::create(id, 0, 1, Deadline::after(10000), nullptr);
  Tally t;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
       std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
    t = tally(capture.text());
    if (t.lines + t.suppressed >= kStrangers) break;
  }
  capture.restore();
  std::printf("%d refused connections in %.2f s: %d lines printed, %d summaries for %lld more\n",
              kStrangers, seconds, t.lines, t.summaries, t.suppressed);
  EXPECT_LE(t.lines + t.summaries, kMaxLines);
  EXPECT_EQ(t.lines + t.suppressed, kStrangers) << "refusals neither printed nor summarised";
}

}  // namespace
}  // namespace coil
