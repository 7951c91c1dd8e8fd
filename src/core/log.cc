#include "core/log.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/fork_guard.h"

namespace coil::log {
namespace {

struct Settings {
  Level level = Level::Warn;
  unsigned mask = kAll;
  char host[64] = {};
};

unsigned subsysBit(const std::string& name) {
  static const struct { const char* name; unsigned bit; } kNames[] = {
      {"INIT", kInit}, {"BOOT", kBoot}, {"NET", kNet},  {"SHM", kShm},
      {"COLL", kColl}, {"TUNE", kTune}, {"ALL", kAll}};
  for (const auto& n : kNames)
    if (strcasecmp(n.name, name.c_str()) == 0) return n.bit;
  return 0;
}

// Parsed once; the environment is read at the first log call.
const Settings& settings() {
  static const Settings s = [] {
    Settings out;
    if (const char* lvl = std::getenv("COIL_DEBUG")) {
      if (!strcasecmp(lvl, "INFO")) out.level = Level::Info;
      else if (!strcasecmp(lvl, "TRACE")) out.level = Level::Trace;
      else if (!strcasecmp(lvl, "WARN")) out.level = Level::Warn;
      else if (!strcasecmp(lvl, "ERROR") || !strcasecmp(lvl, "NONE")) out.level = Level::Error;
    }
    if (const char* sub = std::getenv("COIL_DEBUG_SUBSYS")) {
      std::string list(sub);
      bool exclude = !list.empty() && list[0] == '^';
      if (exclude) list.erase(0, 1);
      unsigned mask = 0;
      size_t pos = 0;
      while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        mask |= subsysBit(list.substr(pos, comma - pos));
        pos = comma + 1;
      }
      out.mask = exclude ? ~mask : mask;
    }
    gethostname(out.host, sizeof(out.host) - 1);
    return out;
  }();
  return s;
}

thread_local int tRank = -1;

// Held across fork (a child of a process whose root thread was logging
// would otherwise never print again).
std::mutex& writeMutex() {
  static std::mutex* m = [] {
    auto* mutex = new std::mutex;
    guardAcrossFork(*mutex);
    return mutex;
  }();
  return *m;
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
  const Settings& s = settings();
  return level <= s.level && (subsys & s.mask) != 0;
}

void write(Level level, unsigned subsys, const std::string& message) {
  const Settings& s = settings();
  char rank[16];
  if (tRank >= 0) std::snprintf(rank, sizeof rank, "%d", tRank);
  else std::snprintf(rank, sizeof rank, "-");
  std::lock_guard<std::mutex> lock(writeMutex());
  std::fprintf(stderr, "%s:%d:%s coil %s %s %s\n", s.host, (int)getpid(), rank, levelName(level),
               subsysName(subsys), message.c_str());
}

void setThreadRank(int rank) { tRank = rank; }

}  // namespace coil::log
