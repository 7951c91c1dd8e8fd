#include "comm/flight_recorder.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "core/env.h"
#include "core/log.h"
#include "reduce/reduce.h"

namespace coil {
namespace {

using std::chrono::nanoseconds;

int64_t steadyNs() {
  return std::chrono::duration_cast<nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t wallNs() {
  return std::chrono::duration_cast<nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A tick and the steady clock read together (the tick is the midpoint of
// two reads around the clock's).
struct ClockPair {
  uint64_t ticks;
  int64_t steadyNs;
};

ClockPair readPair() {
  const uint64_t t1 = FlightRecorder::ticks();
  const int64_t s = steadyNs();
  const uint64_t t2 = FlightRecorder::ticks();
  return {t1 + (t2 - t1) / 2, s};
}

// Taken when the first recorder of the process is made; a dump measures the
// tick rate against it.
const ClockPair& anchor() {
  static const ClockPair a = readPair();
  return a;
}

// Turns an entry's clock (ticks, or coarse ms) into nanoseconds and
// wall-clock time, as of one dump.
struct TimeBase {
  double nsPerTick = 1.0;
  uint64_t nowTicks = 0;
  int64_t nowCoarseMs = 0;
  int64_t nowWallNs = 0;

  // `ticks`: calibrate the TSC too (it waits until 2 ms after the anchor).
  // The clocks an entry is read against are read last, together.
  static TimeBase now(bool ticks) {
    TimeBase b;
    if (ticks) {
#if defined(__x86_64__)
      const ClockPair& a = anchor();
      // Over 2 ms or more, two reads a few ns apart give the rate to 1e-5.
      while (steadyNs() - a.steadyNs < 2'000'000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const ClockPair p = readPair();
      if (p.ticks > a.ticks) b.nsPerTick = double(p.steadyNs - a.steadyNs) / double(p.ticks - a.ticks);
      b.nowTicks = p.ticks;
#else
      b.nowTicks = FlightRecorder::ticks();
#endif
    }
    b.nowCoarseMs = coarseMonotonicMs();
    b.nowWallNs = wallNs();
    return b;
  }
  // From the entry's start to `to` (0: now), on its clock.
  double ns(const FlightRecorder::Entry& e, uint64_t to) const {
    if (!e.timed) {
      const int64_t from = static_cast<int64_t>(e.start);
      const int64_t end = to ? static_cast<int64_t>(to) : nowCoarseMs;
      return end > from ? double(end - from) * 1e6 : 0.0;
    }
    if (to == 0) to = nowTicks;
    return to > e.start ? double(to - e.start) * nsPerTick : 0.0;
  }
  int64_t wallOf(const FlightRecorder::Entry& e) const {
    if (!e.timed) return nowWallNs - (nowCoarseMs - static_cast<int64_t>(e.start)) * 1'000'000;
    const double ago = double(static_cast<int64_t>(nowTicks - e.start)) * nsPerTick;
    return nowWallNs - static_cast<int64_t>(ago);
  }
};

// A duration measured with the coarse clock: whole milliseconds.
std::string coarseDuration(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f ms", ns / 1e6);
  return buf;
}

std::string duration(double ns) {
  char buf[32];
  if (ns < 10'000.0) std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  else if (ns < 10'000'000.0) std::snprintf(buf, sizeof buf, "%.0f us", ns / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f ms", ns / 1e6);
  return buf;
}

// "10:11:12.345678" (UTC), or with the date; "10:11:12.345" with `millis`.
std::string clockTime(int64_t wall, bool withDate, bool millis = false) {
  const time_t secs = static_cast<time_t>(wall / 1'000'000'000);
  tm t{};
  gmtime_r(&secs, &t);
  char buf[64];
  const long us = static_cast<long>((wall % 1'000'000'000) / 1000);
  if (withDate)
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%06ld UTC", t.tm_year + 1900,
                  t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, us);
  else if (millis)
    std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03ld", t.tm_hour, t.tm_min, t.tm_sec, us / 1000);
  else
    std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%06ld", t.tm_hour, t.tm_min, t.tm_sec, us);
  return buf;
}

std::string hostName() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

size_t configuredEntries() {
  return static_cast<size_t>(env::getInt("COIL_FLIGHT_RECORDER_ENTRIES", 0, 1 << 20).value_or(64));
}

bool configuredTiming() {
  return env::getInt("COIL_FLIGHT_RECORDER_TIMING", 0, 1).value_or(0) == 1;
}

}  // namespace

FlightRecorder::FlightRecorder()
    : FlightRecorder(configuredEntries(), env::get("COIL_DEBUG_DUMP_ON_ERROR").value_or(""),
                     configuredTiming()) {}

FlightRecorder::FlightRecorder(size_t entries, std::string dumpPath, bool timing)
    : entries_(entries), timing_(timing), dumpPath_(std::move(dumpPath)) {
  if (entries_ == 0) return;
  size_t slots = 1;
  while (slots < entries_) slots <<= 1;
  mask_ = slots - 1;
  slots_ = std::make_unique<Slot[]>(slots);
  if (timing_) anchor();
}

bool FlightRecorder::read(uint64_t id, Entry* out) const {
  const Slot& s = slot(id);
  for (int attempt = 0; attempt < 64; ++attempt) {
    const uint64_t v1 = s.version.load(std::memory_order_acquire);
    if (v1 & 1) {
      std::this_thread::yield();
      continue;
    }
    // The state word first, acquiring: setAlgorithm() and an untimed end()
    // write one word each with no seqlock round, the name before the state.
    // Read in index order, a reader could take the name from before
    // setAlgorithm() and the state from after end(): an ended entry with no
    // algorithm. Read state first, an ended state brings its name with it.
    uint64_t w[kWords];
    w[kStateWord] = s.words[kStateWord].load(std::memory_order_acquire);
    for (size_t i = 0; i < kWords; ++i)
      if (i != kStateWord) w[i] = s.words[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) != v1) continue;
    std::memcpy(out, w, sizeof *out);
    return out->id == id;
  }
  return false;
}

std::vector<FlightRecorder::Entry> FlightRecorder::snapshot() const {
  std::vector<Entry> out;
  if (entries_ == 0) return out;
  const uint64_t head = head_.load(std::memory_order_acquire);
  const uint64_t first = head > entries_ ? head - entries_ : 0;
  out.reserve(static_cast<size_t>(head - first));
  for (uint64_t id = first; id < head; ++id) {
    Entry e;
    if (read(id, &e)) out.push_back(e);
  }
  return out;
}

std::vector<std::string> FlightRecorder::describe(const std::vector<Entry>& entries) const {
  bool anyTimed = false;
  for (const Entry& e : entries) anyTimed = anyTimed || e.timed;
  const TimeBase base = TimeBase::now(anyTimed);
  std::vector<std::string> lines;
  lines.reserve(entries.size());
  for (const Entry& e : entries) {
    std::ostringstream os;
    os << "#" << e.seq << " ";
    const auto type = static_cast<coilDataType_t>(e.type);
    if (e.kind == kSend || e.kind == kRecv) {
      os << (e.kind == kSend ? "send " : "recv ") << e.count << " x " << reduce::typeName(type)
         << (e.kind == kSend ? " to rank " : " from rank ") << e.peer;
    } else {
      const auto kind = static_cast<algo::CollKind>(e.kind);
      os << algo::collName(kind);
      if (kind != algo::CollKind::Barrier) os << " " << e.count << " x " << reduce::typeName(type);
      if (e.op >= 0 && kind != algo::CollKind::Barrier)
        os << " " << (reduce::validOp(e.op) ? reduce::opName(static_cast<coilRedOp_t>(e.op))
                                            : "premulsum");
      if (e.peer >= 0) os << " root " << e.peer;
    }
    if (e.algorithm) os << " " << e.algorithm;
    const auto span = [&](uint64_t to) {
      const double ns = base.ns(e, to);
      return e.timed ? duration(ns) : coarseDuration(ns);
    };
    switch (e.state) {
      case State::kCompleted:
        os << (e.timed ? " completed in " + span(e.end) : std::string(" completed"));
        break;
      case State::kFailed: os << " failed after " << span(e.end); break;
      default: os << " in progress for " << span(0); break;
    }
    os << ", started " << clockTime(base.wallOf(e), false, !e.timed);
    lines.push_back(os.str());
  }
  return lines;
}

std::string FlightRecorder::expandPath(const std::string& pattern, int rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    switch (pattern[i + 1]) {
      case 'r': out += std::to_string(rank); break;
      case 'p': out += std::to_string(getpid()); break;
      case 'h': out += hostName(); break;
      case '%': out += '%'; break;
      default: out += pattern.substr(i, 2); break;
    }
    ++i;
  }
  return out;
}

void FlightRecorder::dump(const Owner& owner, const std::string& error) const noexcept {
  try {
    const bool toLog = entries_ > 0 && log::enabled(log::Level::Warn, log::kColl);
    if (!toLog && dumpPath_.empty()) return;
    std::lock_guard<std::mutex> lock(dumpMutex_);
    const uint64_t total = recorded();
    const std::vector<Entry> entries = snapshot();
    const std::vector<std::string> lines = describe(entries);
    std::ostringstream who;
    who << "rank " << owner.rank << " of " << owner.nranks << ", comm " << owner.label;
    if (!owner.name.empty()) who << " '" << owner.name << "'";
    std::ostringstream summary;
    if (entries_ == 0)
      summary << "off (COIL_FLIGHT_RECORDER_ENTRIES=0)";
    else
      summary << total << " operation(s) recorded, the last " << entries.size()
              << " follow, oldest first";
    if (toLog) {
      const std::string prefix = "flight recorder (" + who.str() + "): ";
      log::write(log::Level::Warn, log::kColl, prefix + summary.str());
      for (const std::string& line : lines) log::write(log::Level::Warn, log::kColl, prefix + line);
    }
    if (dumpPath_.empty()) return;
    const std::string path = expandPath(dumpPath_, owner.rank);
    std::ostringstream file;
    file << "coil flight recorder: " << who.str() << ", host " << hostName() << ", pid "
         << getpid() << "\n"
         << "written " << clockTime(wallNs(), true) << "; " << summary.str() << "\n"
         << "error: " << error << "\n";
    for (const std::string& line : lines) file << line << "\n";
    file << "\n";
    const std::string text = file.str();
    // One append per dump: ranks and communicators sharing a file do not
    // interleave their lines.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      COIL_WARN(kColl, "flight recorder: cannot open COIL_DEBUG_DUMP_ON_ERROR file ", path, ": ",
                std::strerror(errno));
      return;
    }
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        COIL_WARN(kColl, "flight recorder: cannot write COIL_DEBUG_DUMP_ON_ERROR file ", path,
                  ": ", n < 0 ? std::strerror(errno) : "nothing written");
        break;
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    if (done == text.size())
      COIL_WARN(kColl, "flight recorder (", who.str(), "): written to ", path);
  } catch (...) {
    // A dump is best effort: never let it replace the error that caused it.
  }
}

}  // namespace coil
