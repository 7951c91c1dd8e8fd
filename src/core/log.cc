#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "core/fork_guard.h"
#include "core/log_file.h"
#include "core/log_settings.h"

namespace coil::log {
namespace {

// The level and mask are read on every collective call (enabled()), so they
// are atomics; -1 means the environment has not been read yet. The rest is
// touched only while printing, under writeMutex().
std::atomic<int> gLevel{-1};
std::atomic<unsigned> gMask{kDefaultSubsystems};

struct Output {
  char host[64] = {};
  LogSink sink;
};

// Built when libcoil loads, never destroyed (threads may log during exit).
// Not function-local statics: their first use can fall on one of coil's
// threads (the rendezvous root logs as it starts) while the application
// forks on another, and a child forked inside such an initialisation waits
// on the compiler's guard forever (tests/collectives/fork_after_unique_id_test.cc).
// At load no coil thread exists yet.
Output* const gOutput = new Output;
Output& output() { return *gOutput; }

thread_local int tRank = -1;

// Held across fork (a child of a process whose root thread was logging
// would otherwise never print again).
std::mutex* const gWriteMutex = [] {
  auto* mutex = new std::mutex;
  guardAcrossFork(*mutex);
  return mutex;
}();
std::mutex& writeMutex() { return *gWriteMutex; }

// Caller holds writeMutex().
void loadLocked() {
  const Settings s = settingsFromEnv();
  Output& o = output();
  gethostname(o.host, sizeof(o.host) - 1);
  o.sink.setPattern(s.filePattern);
  gMask.store(s.mask, std::memory_order_relaxed);
  gLevel.store(static_cast<int>(s.level), std::memory_order_release);
}

int currentLevel() {
  const int level = gLevel.load(std::memory_order_acquire);
  if (level >= 0) return level;
  std::lock_guard<std::mutex> lock(writeMutex());
  if (gLevel.load(std::memory_order_acquire) < 0) loadLocked();
  return gLevel.load(std::memory_order_acquire);
}

const char* levelName(Level l) {
  switch (l) {
    case Level::Error: return "ERROR";
    case Level::Warn: return "WARN";
    case Level::Info: return "INFO";
    case Level::Trace: return "TRACE";
  }
  return "?";
}

const char* subsysName(unsigned s) {
  switch (s) {
    case kInit: return "INIT";
    case kBoot: return "BOOT";
    case kNet: return "NET";
    case kShm: return "SHM";
    case kColl: return "COLL";
    case kTune: return "TUNE";
  }
  return "ALL";
}

}  // namespace

bool enabled(Level level, unsigned subsys) {
  // The level first: reading it loads the environment, and its acquire
  // makes the mask stored before it visible. (As two arguments of one call
  // the order was unspecified: the mask could be read before the first load,
  // and a line of a subsystem the user left out slipped through.)
  const auto current = static_cast<Level>(currentLevel());
  return shows(level, subsys, current, gMask.load(std::memory_order_relaxed));
}

void write(Level level, unsigned subsys, const std::string& message) {
  currentLevel();  // the environment is read before the first line
  char rank[16];
  if (tRank >= 0) std::snprintf(rank, sizeof rank, "%d", tRank);
  else std::snprintf(rank, sizeof rank, "-");
  std::lock_guard<std::mutex> lock(writeMutex());
  Output& o = output();
  std::FILE* out = o.sink.stream(o.host);
  std::fprintf(out, "%s:%d:%s coil %s %s %s\n", o.host, (int)getpid(), rank, levelName(level),
               subsysName(subsys), message.c_str());
  std::fflush(out);  // nothing buffered: a crash or fork loses or repeats no line
}

void reload() {
  std::lock_guard<std::mutex> lock(writeMutex());
  loadLocked();
}

void setThreadRank(int rank) { tRank = rank; }

}  // namespace coil::log
