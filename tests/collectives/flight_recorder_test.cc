// The flight recorder (src/comm/flight_recorder.h): the ring itself (the
// last N entries, N = 0, a dump racing the recording thread), what a dump
// looks like, and end to end: ranks that stop calling make the others time
// out; the timeout names every missing rank, and each rank's log and
// COIL_DEBUG_DUMP_ON_ERROR file list its last operations, the failed one last.
// Also measures the recorder's cost per call next to a small all-reduce.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/flight_recorder.h"
#include "core/deadline.h"
#include "harness/run_ranks.h"

namespace coil::test {
namespace {

using Entry = FlightRecorder::Entry;
using State = FlightRecorder::State;
constexpr uint8_t kAllReduce = static_cast<uint8_t>(algo::CollKind::AllReduce);

// The start time a call's deadline would pass (core/deadline.h).
int64_t now() { return coarseMonotonicMs(); }

// ---- the ring ---------------------------------------------------------------

TEST(FlightRecorderRing, KeepsTheLastNOldestFirst) {
  for (bool timing : {false, true})
  for (size_t n : {1, 4, 5, 64}) {
    SCOPED_TRACE(std::to_string(n) + (timing ? " entries, timed" : " entries"));
    FlightRecorder r(n, "", timing);
    EXPECT_TRUE(r.snapshot().empty());
    for (uint32_t i = 0; i < 3 * n + 2; ++i) {
      const uint64_t id = r.begin(kAllReduce, i + 1, 10 * i, coilFloat, coilSum, -1, now());
      EXPECT_EQ(id, i);
      r.setAlgorithm("ring");
      r.end(id, i % 3 == 0 ? State::kFailed : State::kCompleted);
    }
    const std::vector<Entry> all = r.snapshot();
    ASSERT_EQ(all.size(), n);
    EXPECT_EQ(r.recorded(), 3 * n + 2);
    for (size_t k = 0; k < n; ++k) {
      const Entry& e = all[k];
      const uint64_t i = 2 * n + 2 + k;  // the last n, oldest first
      EXPECT_EQ(e.id, i);
      EXPECT_EQ(e.seq, i + 1);
      EXPECT_EQ(e.count, 10 * i);
      EXPECT_EQ(e.state, i % 3 == 0 ? State::kFailed : State::kCompleted);
      EXPECT_STREQ(e.algorithm, "ring");
      EXPECT_EQ(e.timed, timing);
      // Untimed, a completion reads no clock: only failures have an end.
      if (timing || e.state == State::kFailed) {
        EXPECT_GE(e.end, e.start);
      } else {
        EXPECT_EQ(e.end, 0u);
      }
    }
  }
}

TEST(FlightRecorderRing, ZeroEntriesRecordsNothing) {
  FlightRecorder r(0, "");
  EXPECT_EQ(r.begin(kAllReduce, 1, 8, coilFloat, coilSum, -1, now()), FlightRecorder::kNone);
  r.setAlgorithm("ring");
  r.end(FlightRecorder::kNone, State::kCompleted);
  { FlightRecorder::Scope s(r, algo::CollKind::Broadcast, 2, 8, coilFloat, coilSum, 0, now()); }
  {
    FlightRecorder::Batch b(r);
    b.add(true, 0, 4, coilFloat, 1, now());
    b.fail([](size_t) { return false; });
  }
  EXPECT_TRUE(r.snapshot().empty());
  EXPECT_EQ(r.recorded(), 0u);
}

TEST(FlightRecorderRing, ScopesAndBatchesEndTheirEntries) {
  FlightRecorder r(16, "");
  {
    FlightRecorder::Scope s(r, algo::CollKind::AllReduce, 1, 8, coilFloat, coilSum, 0, now());
    s.complete();
  }
  {
    FlightRecorder::Scope s(r, algo::CollKind::Broadcast, 2, 8, coilInt32, coilSum, 3, now());
    s.fail();
    s.complete();  // too late: an ended entry stays as it ended
  }
  try {
    FlightRecorder::Scope s(r, algo::CollKind::Gather, 3, 8, coilInt32, coilSum, 1, now());
    throw std::runtime_error("unwinding");
  } catch (const std::runtime_error&) {
  }
  {
    FlightRecorder::Batch b(r);
    b.add(true, 0, 4, coilFloat, 1, now());
    b.add(false, 0, 4, coilFloat, 2, now());
    b.add(false, 1, 4, coilFloat, 2, now());
    b.fail([](size_t i) { return i == 0; });  // the send went out, the receives never came
  }
  {
    FlightRecorder::Batch b(r);
    b.add(true, 1, 4, coilFloat, 1, now());
    b.complete();
  }
  { FlightRecorder::Batch b(r); b.add(true, 2, 4, coilFloat, 1, now()); }  // left without an end
  const std::vector<Entry> e = r.snapshot();
  ASSERT_EQ(e.size(), 8u);
  EXPECT_EQ(e[0].state, State::kCompleted);
  EXPECT_EQ(e[0].peer, -1) << "an all-reduce has no root";
  EXPECT_EQ(e[0].op, coilSum);
  EXPECT_EQ(e[1].state, State::kFailed);
  EXPECT_EQ(e[1].peer, 3);
  EXPECT_EQ(e[1].op, -1) << "a broadcast has no op";
  EXPECT_EQ(e[2].state, State::kFailed) << "an exception left the scope";
  EXPECT_EQ(e[3].state, State::kCompleted);
  EXPECT_EQ(e[3].kind, FlightRecorder::kSend);
  EXPECT_EQ(e[4].state, State::kFailed);
  EXPECT_EQ(e[4].kind, FlightRecorder::kRecv);
  EXPECT_EQ(e[5].state, State::kFailed);
  EXPECT_EQ(e[6].state, State::kCompleted);
  EXPECT_EQ(e[7].state, State::kFailed) << "a batch left without complete() failed";
}

// Untimed (the default): "completed", durations of failed and running
// operations in whole ms, start times to the ms; timed: "completed in",
// durations in us, start times to the us.
TEST(FlightRecorderRing, DescribesEachEntryOnOneLine) {
  for (bool timing : {false, true}) {
    SCOPED_TRACE(timing ? "timed" : "untimed");
    FlightRecorder r(16, "", timing);
    r.end(r.begin(kAllReduce, 41, 1024, coilFloat, coilSum, -1, now()), State::kCompleted);
    r.setAlgorithm("oneshot");  // the latest entry, even once ended
    const uint64_t b = r.begin(uint8_t(algo::CollKind::Broadcast), 42, 7, coilInt32, coilSum, 1, now());
    r.setAlgorithm("ring");
    r.end(b, State::kFailed);
    r.end(r.begin(uint8_t(algo::CollKind::Barrier), 43, 1, coilUint8, coilMax, 0, now()), State::kCompleted);
    r.end(r.begin(FlightRecorder::kSend, 0, 4, coilInt64, -1, 3, now()), State::kCompleted);
    r.begin(FlightRecorder::kRecv, 5, 4, coilFloat16, -1, 2, now());  // still in progress
    r.begin(kAllReduce, 44, 9, coilFloat64, coilNumOps + 2, -1, now());  // a pre-multiplied sum
    r.begin(uint8_t(algo::CollKind::Reduce), 45, 3, coilInt64, coilMax, 2, now());
    const std::vector<std::string> lines = r.describe(r.snapshot());
    ASSERT_EQ(lines.size(), 7u);
    const std::string completed = timing ? " completed in " : " completed, started ";
    const std::string expected[] = {
        "#41 allreduce 1024 x float32 sum oneshot" + completed,
        "#42 broadcast 7 x int32 root 1 ring failed after ",
        "#43 barrier" + completed,
        "#0 send 4 x int64 to rank 3" + completed,
        "#5 recv 4 x float16 from rank 2 in progress for ",
        "#44 allreduce 9 x float64 premulsum in progress for ",
        "#45 reduce 3 x int64 max root 2 in progress for ",
    };
    for (size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(lines[i].rfind(expected[i], 0), 0u) << lines[i];
      const size_t started = lines[i].find(", started ");
      ASSERT_NE(started, std::string::npos) << lines[i];
      // "HH:MM:SS.mmm" untimed, "HH:MM:SS.uuuuuu" timed
      EXPECT_EQ(lines[i].size() - started - 10, timing ? 15u : 12u) << lines[i];
      if (lines[i].find(" completed,") == std::string::npos) {
        EXPECT_NE(lines[i].find(timing ? " us, started " : " ms, started "), std::string::npos)
            << lines[i];
      }
    }
  }
}

// An untimed operation that waited says how long in ms, from the coarse
// clock: a failure 30 ms after its start "failed after 30 ms" (give or take
// the clock's tick, and a tick late under load: a loaded CI machine once
// said 24), one still running says for how long so far.
TEST(FlightRecorderRing, UntimedDurationsAreWholeMilliseconds) {
  FlightRecorder r(4, "");
  const uint64_t failing = r.begin(kAllReduce, 1, 8, coilFloat, coilSum, -1, now());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  r.end(failing, State::kFailed);
  r.begin(kAllReduce, 2, 8, coilFloat, coilSum, -1, now() - 250);  // began 250 ms ago
  const std::vector<std::string> lines = r.describe(r.snapshot());
  ASSERT_EQ(lines.size(), 2u);
  auto msOf = [](const std::string& line, const std::string& after) {
    const size_t at = line.find(after);
    return at == std::string::npos ? -1L : std::strtol(line.c_str() + at + after.size(), nullptr, 10);
  };
  const long failedMs = msOf(lines[0], " failed after ");
  EXPECT_GE(failedMs, 20) << lines[0];
  EXPECT_LE(failedMs, 1000) << lines[0];
  const long runningMs = msOf(lines[1], " in progress for ");
  EXPECT_GE(runningMs, 245) << lines[1];
  EXPECT_LE(runningMs, 1250) << lines[1];
}

// A dump from another thread while the owner records: every entry it
// returns is whole (no mix of two operations), in order, at most N of them.
TEST(FlightRecorderRing, ConcurrentDumpSeesWholeEntries) {
  constexpr size_t kN = 8;
  FlightRecorder r(kN, "");
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      const uint64_t id = r.begin(uint8_t(algo::CollKind::Broadcast), uint32_t(i * 7),
                                  i * 3 + 1, coilFloat, coilSum, int(i % 5), now());
      r.setAlgorithm(i % 2 ? "ring" : "tree");
      r.end(id, i % 4 == 0 ? State::kFailed : State::kCompleted);
    }
  });
  // A failed ASSERT returns from the test: stop and join the writer then
  // too, or the joinable thread's destructor aborts the whole binary.
  struct StopAndJoin {
    std::atomic<bool>& stop;
    std::thread& writer;
    ~StopAndJoin() {
      stop = true;
      writer.join();
    }
  } stopAndJoin{stop, writer};
  size_t snapshots = 0, entries = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    const std::vector<Entry> s = r.snapshot();
    ASSERT_LE(s.size(), kN);
    for (size_t k = 0; k < s.size(); ++k) {
      const Entry& e = s[k];
      const uint64_t i = e.id;
      ASSERT_EQ(e.seq, uint32_t(i * 7)) << "torn entry " << i;
      ASSERT_EQ(e.count, i * 3 + 1) << "torn entry " << i;
      ASSERT_EQ(e.peer, int(i % 5)) << "torn entry " << i;
      if (e.state != State::kStarted) {
        ASSERT_EQ(e.state, i % 4 == 0 ? State::kFailed : State::kCompleted);
        if (e.state == State::kFailed) {
          ASSERT_GE(e.end, e.start);
        }
        ASSERT_STREQ(e.algorithm, i % 2 ? "ring" : "tree");
      }
      if (k) {
        ASSERT_GT(e.id, s[k - 1].id);
      }
    }
    ++snapshots;
    entries += s.size();
  }
  EXPECT_GT(snapshots, 10u);
  EXPECT_GT(entries, 0u);
}

TEST(FlightRecorderRing, DumpPathPattern) {
  const std::string pid = std::to_string(getpid());
  EXPECT_EQ(FlightRecorder::expandPath("/tmp/fr-%r-%p.txt", 3), "/tmp/fr-3-" + pid + ".txt");
  EXPECT_EQ(FlightRecorder::expandPath("a%%b%x%", 0), "a%b%x%");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(FlightRecorder::expandPath("%h", 0), std::string(host));
}

// ---- files ------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/coil-flight-XXXXXX";
    const char* made = mkdtemp(pattern);
    if (made) path_ = made;
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> linesOf(const std::string& text, const std::string& prefix = "") {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

// The entry lines of a dump file (they start with "#").
std::vector<std::string> entryLines(const std::string& text) { return linesOf(text, "#"); }

TEST(FlightRecorderRing, DumpWritesTheFileAndSurvivesAnUnwritableOne) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  {
    FlightRecorder r(4, dir.path() + "/dump-%r.txt");
    r.end(r.begin(kAllReduce, 1, 8, coilFloat, coilSum, -1, now()), State::kCompleted);
    r.end(r.begin(kAllReduce, 2, 8, coilFloat, coilSum, -1, now()), State::kFailed);
    r.dump({5, 8, "abc-1", "trainer"}, "allreduce #2: it broke");
    r.dump({5, 8, "abc-1", "trainer"}, "a second dump is appended");
    const std::string text = readFile(dir.path() + "/dump-5.txt");
    EXPECT_NE(text.find("coil flight recorder: rank 5 of 8, comm abc-1 'trainer', host "),
              std::string::npos) << text;
    EXPECT_NE(text.find("error: allreduce #2: it broke\n"), std::string::npos) << text;
    EXPECT_NE(text.find("error: a second dump is appended\n"), std::string::npos) << text;
    EXPECT_NE(text.find("2 operation(s) recorded, the last 2 follow, oldest first"),
              std::string::npos) << text;
    const auto entries = entryLines(text);
    ASSERT_EQ(entries.size(), 4u) << text;
    EXPECT_EQ(entries[1].rfind("#2 allreduce 8 x float32 sum failed after ", 0), 0u) << entries[1];
  }
  {
    FlightRecorder r(0, dir.path() + "/off.txt");
    r.dump({0, 2, "abc-2", ""}, "broken");
    const std::string text = readFile(dir.path() + "/off.txt");
    EXPECT_NE(text.find("off (COIL_FLIGHT_RECORDER_ENTRIES=0)"), std::string::npos) << text;
    EXPECT_TRUE(entryLines(text).empty());
  }
  {
    FlightRecorder r(4, dir.path() + "/no/such/dir/dump.txt");
    r.end(r.begin(kAllReduce, 1, 8, coilFloat, coilSum, -1, now()), State::kFailed);
    r.dump({0, 2, "abc-3", ""}, "broken");  // logged, no crash, no throw
  }
}

// ---- end to end ---------------------------------------------------------------

// A page shared by the ranks, threads or forked processes alike.
struct Shared {
  std::atomic<int> rank0Done;
  std::atomic<int> namedMissing;  // timeouts that named the missing rank(s)
};

Shared* sharedPage() {
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) Shared{};
}

bool waitFor(const std::atomic<int>& flag, int seconds) {
  const auto until = Clock::now() + std::chrono::seconds(seconds);
  while (!flag.load()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// Redirects this process's stderr to a file (forked ranks only).
class StderrToFile {
 public:
  explicit StderrToFile(const std::string& path) {
    std::fflush(stderr);
    saved_ = dup(2);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
  }
  ~StderrToFile() {
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
  }

 private:
  int saved_;
};

// What every rank does before rank 0 goes on alone.
void commonCalls(coilComm_t comm, int rank, int n) {
  std::vector<float> f(1024, 1.0f), g(1024 * n);
  std::vector<int32_t> i(7, rank);
  std::vector<int64_t> l(3, rank);
  ASSERT_EQ(coilAllReduce(f.data(), f.data(), 1024, coilFloat, coilSum, comm, nullptr), coilSuccess);
  ASSERT_EQ(coilBroadcast(i.data(), i.data(), 7, coilInt32, 1, comm, nullptr), coilSuccess);
  ASSERT_EQ(coilAllGather(f.data(), g.data(), 5, coilFloat, comm, nullptr), coilSuccess);
  ASSERT_EQ(coilBarrier(comm, nullptr), coilSuccess);
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  ASSERT_EQ(coilSend(f.data(), 4, coilFloat, (rank + 1) % n, comm, nullptr), coilSuccess);
  ASSERT_EQ(coilRecv(g.data(), 4, coilFloat, (rank + n - 1) % n, comm, nullptr), coilSuccess);
  ASSERT_EQ(coilGroupEnd(), coilSuccess);
  ASSERT_EQ(coilReduce(l.data(), l.data(), 3, coilInt64, coilMax, 2, comm, nullptr), coilSuccess);
}

// The entry lines every rank's dump starts with (commonCalls on 3 ranks),
// without the algorithm and the times.
std::vector<std::string> commonEntryStarts(int rank) {
  const int n = 3;
  return {"#1 allreduce 1024 x float32 sum ",
          "#2 broadcast 7 x int32 root 1 ",
          "#3 allgather 5 x float32 ",
          "#4 barrier ",
          "#0 send 4 x float32 to rank " + std::to_string((rank + 1) % n) + " ",
          "#0 recv 4 x float32 from rank " + std::to_string((rank + n - 1) % n) + " ",
          "#5 reduce 3 x int64 max root 2 "};
}

// `lines` are the entry lines of one dump: the common calls completed,
// then any number of completed 16-float all-reduces, then `last` failed
// (`timed`: with durations, COIL_FLIGHT_RECORDER_TIMING=1).
void expectHistory(const std::vector<std::string>& lines, int rank, const std::string& last,
                   bool timed) {
  const std::string completed = timed ? " completed in " : " completed, started ";
  const auto starts = commonEntryStarts(rank);
  ASSERT_GT(lines.size(), starts.size());
  for (size_t k = 0; k < starts.size(); ++k) {
    EXPECT_EQ(lines[k].rfind(starts[k], 0), 0u) << lines[k];
    EXPECT_NE(lines[k].find(completed), std::string::npos) << lines[k];
  }
  for (size_t k = starts.size(); k + 1 < lines.size(); ++k) {
    EXPECT_NE(lines[k].find(" allreduce 16 x float32 sum "), std::string::npos) << lines[k];
    EXPECT_NE(lines[k].find(completed), std::string::npos) << lines[k];
  }
  EXPECT_EQ(lines.back().rfind(last, 0), 0u) << lines.back();
  EXPECT_NE(lines.back().find(" failed after "), std::string::npos) << lines.back();
}

class FlightRecorderEndToEnd : public ::testing::TestWithParam<RankSetup> {};

// Rank 0 calls an all-reduce that ranks 1 and 2 never join: it times out
// naming both, and every rank's dump holds its history with the failed call
// last. Over tcp the operations are timed (COIL_FLIGHT_RECORDER_TIMING=1).
TEST_P(FlightRecorderEndToEnd, TimeoutNamesTheMissingRanksAndDumps) {
  const RankSetup setup = GetParam();
  const bool timed = setup.transport == std::string("tcp");
  ScopedEnv timing("COIL_FLIGHT_RECORDER_TIMING", timed ? "1" : "");
  const int n = setup.nranks;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  Shared* shared = sharedPage();
  ASSERT_NE(shared, nullptr);
  ScopedEnv dump("COIL_DEBUG_DUMP_ON_ERROR", dir.path() + "/rank%r-%p.txt");
  ScopedEnv entries("COIL_FLIGHT_RECORDER_ENTRIES", "");
  const bool procs = setup.launch == Launch::Processes;
  runRanksRaw(setup, [&](const coilUniqueId& id, int rank) {
    // A forked rank's log lines go to a file of its own, to be checked.
    std::unique_ptr<StderrToFile> log;
    if (procs) log = std::make_unique<StderrToFile>(dir.path() + "/log" + std::to_string(rank));
    coilComm_t comm = initWithTimeout(id, n, rank, 500);
    ASSERT_NE(comm, nullptr);
    ASSERT_NO_FATAL_FAILURE(commonCalls(comm, rank, n));
    std::vector<float> x(16, 1.0f);
    int seq = 6;  // of the call that fails
    if (rank == 0) {
      EXPECT_EQ(coilAllReduce(x.data(), x.data(), 16, coilFloat, coilSum, comm, nullptr), coilTimeout);
      const std::string msg = coilGetLastError(comm);
      EXPECT_NE(msg.find("allreduce #6 (16 x float32, sum): timed out after 500 ms waiting for "),
                std::string::npos) << msg;
      EXPECT_NE(msg.find("ranks 1, 2"), std::string::npos) << msg;
      shared->rank0Done = 1;
    } else {
      // Rank 0 broke the communicator: this rank's calls fail at once. Over
      // tcp, rank 0's input to #6 may already be in the socket buffers, so
      // #6 may still complete; #7 cannot.
      ASSERT_TRUE(waitFor(shared->rank0Done, 60));
      const auto t0 = Clock::now();
      coilResult_t rc = coilSuccess;
      for (; seq <= 7 && rc == coilSuccess; ++seq)
        rc = coilAllReduce(x.data(), x.data(), 16, coilFloat, coilSum, comm, nullptr);
      --seq;
      EXPECT_EQ(rc, coilRemoteError) << coilGetLastError(comm);
      EXPECT_LT(secondsSince(t0), 5.0);
    }
    const std::string last = "#" + std::to_string(seq) + " allreduce 16 x float32 sum ";
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    log.reset();

    const std::string path = dir.path() + "/rank" + std::to_string(rank) + "-" +
                             std::to_string(getpid()) + ".txt";
    const std::string text = readFile(path);
    SCOPED_TRACE(path + ":\n" + text);
    EXPECT_NE(text.find("coil flight recorder: rank " + std::to_string(rank) + " of 3, comm "),
              std::string::npos);
    const std::string ops = std::to_string(seq + 2);  // 5 collectives + 2 p2p before #6
    EXPECT_NE(text.find(ops + " operation(s) recorded, the last " + ops + " follow, oldest first"),
              std::string::npos);
    const std::string error = linesOf(text, "error: ").empty() ? "" : linesOf(text, "error: ")[0];
    if (rank == 0) EXPECT_NE(error.find("timed out after 500 ms"), std::string::npos) << error;
    else EXPECT_NE(error.find("rank "), std::string::npos) << error;
    expectHistory(entryLines(text), rank, last, timed);

    if (procs) {  // the same lines in the log, at WARN, prefixed with who
      const std::string logText = readFile(dir.path() + "/log" + std::to_string(rank));
      const std::string prefix = "flight recorder (rank " + std::to_string(rank) + " of 3, comm ";
      std::vector<std::string> logged;
      for (const std::string& line : linesOf(logText)) {
        const size_t at = line.find(prefix);
        if (at == std::string::npos) continue;
        EXPECT_NE(line.find(" WARN "), std::string::npos) << line;
        const size_t colon = line.find("): ", at);
        if (colon != std::string::npos && line.compare(colon + 3, 1, "#") == 0)
          logged.push_back(line.substr(colon + 3));
      }
      SCOPED_TRACE("log:\n" + logText);
      expectHistory(logged, rank, last, timed);
      EXPECT_NE(logText.find("written to " + path), std::string::npos);
    }
  });
  munmap(shared, 4096);
}

// Ranks 0 and 1 call, rank 2 does not: each of them times out naming rank 2
// (or, if the other one's timeout broke the communicator first, fails
// naming that rank).
TEST_P(FlightRecorderEndToEnd, TwoArriveOneDoesNot) {
  const RankSetup setup = GetParam();
  const int n = setup.nranks;
  Shared* shared = sharedPage();
  ASSERT_NE(shared, nullptr);
  ScopedEnv dump("COIL_DEBUG_DUMP_ON_ERROR", "");
  runRanksRaw(setup, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, n, rank, 500);
    ASSERT_NE(comm, nullptr);
    std::vector<float> x(16, 1.0f);
    ASSERT_EQ(coilAllReduce(x.data(), x.data(), 16, coilFloat, coilSum, comm, nullptr), coilSuccess);
    if (rank < 2) {
      const coilResult_t rc = coilAllReduce(x.data(), x.data(), 16, coilFloat, coilSum, comm, nullptr);
      const std::string msg = coilGetLastError(comm);
      if (rc == coilTimeout) {
        EXPECT_NE(msg.find("timed out after 500 ms waiting for"), std::string::npos) << msg;
        EXPECT_NE(msg.find("rank 2 ("), std::string::npos) << msg;
        EXPECT_EQ(msg.find("ranks"), std::string::npos) << msg;
        ++shared->namedMissing;
      } else {
        EXPECT_EQ(rc, coilRemoteError) << msg;
        EXPECT_NE(msg.find("rank " + std::to_string(1 - rank)), std::string::npos) << msg;
      }
      ++shared->rank0Done;
    } else {
      ASSERT_TRUE(waitFor(shared->rank0Done, 60));
      while (shared->rank0Done.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
  EXPECT_GE(shared->namedMissing.load(), 1) << "no rank timed out naming rank 2";
  munmap(shared, 4096);
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, FlightRecorderEndToEnd,
    ::testing::Values(RankSetup{3, Launch::Threads, "shm", 120}, RankSetup{3, Launch::Threads, "tcp", 120},
                      RankSetup{3, Launch::Processes, "shm", 120},
                      RankSetup{3, Launch::Processes, "tcp", 120}),
    [](const ::testing::TestParamInfo<RankSetup>& info) { return paramName(info.param); });

// The one-shot over FIFOs (no shared window) waits for its peers one after
// another; at the deadline it names every one whose input is not there.
TEST(FlightRecorderTimeouts, FifoOneShotNamesEveryMissingRank) {
  ScopedEnv window("COIL_SHM_WINDOW", "0");
  ScopedEnv algo("COIL_ALGO", "allreduce:oneshot");
  ScopedEnv dump("COIL_DEBUG_DUMP_ON_ERROR", "");
  std::atomic<bool> rank0Done{false};
  runRanksRaw({4, Launch::Threads, "shm"}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, 4, rank, 500);
    ASSERT_NE(comm, nullptr);
    std::vector<float> x(16, 1.0f);
    ASSERT_EQ(coilAllReduce(x.data(), x.data(), 16, coilFloat, coilSum, comm, nullptr), coilSuccess);
    if (rank == 0) {
      EXPECT_EQ(coilAllReduce(x.data(), x.data(), 16, coilFloat, coilSum, comm, nullptr), coilTimeout);
      const std::string msg = coilGetLastError(comm);
      EXPECT_NE(msg.find("timed out after 500 ms waiting for data from ranks 1, 2, 3 (shm)"),
                std::string::npos) << msg;
      rank0Done = true;
    } else {
      while (!rank0Done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

// Point-to-point: the timeout names the peer and lists what is pending; the
// dump keeps only COIL_FLIGHT_RECORDER_ENTRIES entries.
TEST(FlightRecorderPointToPoint, TimeoutNamesThePeerAndTheDumpKeepsN) {
  for (const std::string& transport : testedTransports()) {
    SCOPED_TRACE(transport);
    TempDir dir;
    ASSERT_FALSE(dir.path().empty());
    ScopedEnv dump("COIL_DEBUG_DUMP_ON_ERROR", dir.path() + "/rank%r.txt");
    ScopedEnv entries("COIL_FLIGHT_RECORDER_ENTRIES", "3");
    std::atomic<bool> rank0Done{false};
    runRanksRaw({2, Launch::Threads, transport}, [&](const coilUniqueId& id, int rank) {
      coilComm_t comm = initWithTimeout(id, 2, rank, 500);
      ASSERT_NE(comm, nullptr);
      std::vector<float> x(64, 1.0f), y(64);
      for (int k = 0; k < 4; ++k)
        ASSERT_EQ(coilAllReduce(x.data(), x.data(), 64, coilFloat, coilSum, comm, nullptr), coilSuccess);
      if (rank == 0) {
        ASSERT_EQ(coilGroupStart(), coilSuccess);
        coilSend(x.data(), 64, coilFloat, 1, comm, nullptr);
        coilRecv(y.data(), 64, coilFloat, 1, comm, nullptr);
        EXPECT_EQ(coilGroupEnd(), coilTimeout);
        const std::string msg = coilGetLastError(comm);
        EXPECT_NE(msg.find("point-to-point: timed out after 500 ms waiting for rank 1; pending: "),
                  std::string::npos) << msg;
        EXPECT_NE(msg.find("recv from rank 1 (64 x float32)"), std::string::npos) << msg;
        rank0Done = true;
      } else {
        while (!rank0Done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    });
    const std::string text = readFile(dir.path() + "/rank0.txt");
    SCOPED_TRACE(text);
    EXPECT_NE(text.find("6 operation(s) recorded, the last 3 follow"), std::string::npos);
    const auto lines = entryLines(text);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0].rfind("#4 allreduce 64 x float32 sum ", 0), 0u) << lines[0];
    EXPECT_EQ(lines[1].rfind("#0 send 64 x float32 to rank 1 ", 0), 0u) << lines[1];
    EXPECT_EQ(lines[2].rfind("#0 recv 64 x float32 from rank 1 failed after ", 0), 0u) << lines[2];
    EXPECT_EQ(readFile(dir.path() + "/rank1.txt"), "") << "rank 1 never failed";
  }
}

// A receive cut short by this process's own coilCommRevoke failed on
// request (a shutdown stopping a thread that waits for messages): no dump.
// The peer, which sees the connection close, is a real failure and dumps.
TEST(FlightRecorderPointToPoint, OwnRevokeDoesNotDump) {
  for (const std::string& transport : testedTransports()) {
    SCOPED_TRACE(transport);
    TempDir dir;
    ASSERT_FALSE(dir.path().empty());
    ScopedEnv dump("COIL_DEBUG_DUMP_ON_ERROR", dir.path() + "/rank%r.txt");
    std::atomic<bool> rank0Done{false};
    runRanksRaw({2, Launch::Threads, transport}, [&](const coilUniqueId& id, int rank) {
      coilComm_t comm = initWithTimeout(id, 2, rank, 20000);
      ASSERT_NE(comm, nullptr);
      std::vector<float> y(64);
      if (rank == 0) {
        std::thread revoker([comm] {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          coilCommRevoke(comm);
        });
        EXPECT_NE(coilRecv(y.data(), 64, coilFloat, 1, comm, nullptr), coilSuccess);
        revoker.join();
        rank0Done = true;
      } else {
        while (!rank0Done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
    });
    EXPECT_EQ(readFile(dir.path() + "/rank0.txt"), "") << "rank 0 revoked its own communicator";
  }
}

TEST(FlightRecorderConfig, BadEntriesValueFailsInit) {
  ScopedEnv entries("COIL_FLIGHT_RECORDER_ENTRIES", "lots");
  coilComm_t comm = nullptr;
  EXPECT_EQ(coilCommInitAll(&comm, 1, nullptr), coilInvalidUsage);
  EXPECT_NE(std::string(coilGetLastError(nullptr)).find("COIL_FLIGHT_RECORDER_ENTRIES"),
            std::string::npos) << coilGetLastError(nullptr);
}

// ---- cost ---------------------------------------------------------------------

// The start time is the deadline's clock read, which a call makes anyway.
double nsPerRecordedCall(FlightRecorder& r, int calls) {
  const int64_t startMs = now();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    FlightRecorder::Scope s(r, algo::CollKind::AllReduce, uint32_t(i), 8, coilFloat, coilSum, 0,
                            startMs);
    r.setAlgorithm("oneshot");
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
         calls;
}

// Microseconds per 8-float all-reduce on 2 ranks (threads, shm), recorder
// on or off (COIL_FLIGHT_RECORDER_ENTRIES is read when a communicator is made).
double usPerSmallAllReduce(bool recorder, int calls) {
  ScopedEnv entries("COIL_FLIGHT_RECORDER_ENTRIES", recorder ? "64" : "0");
  std::atomic<double> us{0};
  runRanksRaw({2, Launch::Threads, "shm"}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, 2, rank, 60000);
    ASSERT_NE(comm, nullptr);
    float x[8] = {};
    for (int i = 0; i < 200; ++i) coilAllReduce(x, x, 8, coilFloat, coilSum, comm, nullptr);
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i)
      ASSERT_EQ(coilAllReduce(x, x, 8, coilFloat, coilSum, comm, nullptr), coilSuccess);
    if (rank == 0) us = secondsSince(t0) * 1e6 / calls;
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
  return us.load();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(FlightRecorderCost, PerCallNextToASmallAllReduce) {
  FlightRecorder untimed(64, ""), timed(64, "", true);
  nsPerRecordedCall(untimed, 100000);
  nsPerRecordedCall(timed, 100000);
  // Interleaved rounds: on a shared machine the spread says how far to trust them.
  std::vector<double> record, recordTimed, on, off;
  for (int round = 0; round < 7; ++round) {
    record.push_back(nsPerRecordedCall(untimed, 2000000));
    recordTimed.push_back(nsPerRecordedCall(timed, 2000000));
    on.push_back(usPerSmallAllReduce(true, 20000));
    off.push_back(usPerSmallAllReduce(false, 20000));
  }
  auto least = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  const double ns = median(record), nsTimed = median(recordTimed);
  std::printf("flight recorder: %.1f ns per call (begin + algorithm + end), median of 7 "
              "(best %.1f); with COIL_FLIGHT_RECORDER_TIMING=1 %.1f (best %.1f)\n",
              ns, least(record), nsTimed, least(recordTimed));
  std::printf("8-float all-reduce, 2 ranks as threads, shm, us per call: recorder on %.2f "
              "(best %.2f), off %.2f (best %.2f), medians of 7\n",
              median(on), least(on), median(off), least(off));
  std::printf("recorder / all-reduce: %.4f (medians), %.4f (bests); timed %.4f (medians)\n",
              ns / (median(off) * 1000), least(record) / (least(off) * 1000),
              nsTimed / (median(off) * 1000));
  RecordProperty("record_ns", std::to_string(ns));
  RecordProperty("record_timed_ns", std::to_string(nsTimed));
  RecordProperty("allreduce_us_on", std::to_string(median(on)));
  RecordProperty("allreduce_us_off", std::to_string(median(off)));
  // Loose: it must stay far below a small all-reduce even on a busy or sanitized build.
  EXPECT_LT(ns, 1000.0);
  EXPECT_LT(nsTimed, 1000.0);
}

}  // namespace
}  // namespace coil::test
