// One logging family for coil.
//
//   COIL_DEBUG=WARN|INFO|TRACE        (default: errors and warnings only)
//   COIL_DEBUG_SUBSYS=INIT,BOOT,NET,SHM,COLL,TUNE,ALL
//       default: all but COLL and TUNE, whose lines come once per collective
//       call (log_settings.h); ^X excludes. Only INFO and TRACE lines are
//       filtered: warnings and errors print whatever the subsystem
//   COIL_DEBUG_FILE=/path/coil-%h-%p.log   (default stderr; log_file.h)
//
// Lines are prefixed "host:pid:rank coil LEVEL SUBSYS". The rank is the one
// the calling thread is working for (setThreadRank), "-" if none. The
// environment is read at the first log call and again by reload()
// (coilResetDebugInit).
#pragma once

#include <sstream>
#include <string>

namespace coil::log {

enum class Level { Error = 0, Warn = 1, Info = 2, Trace = 3 };
enum Subsys : unsigned {
  kInit = 1u << 0,   // communicator creation and teardown
  kBoot = 1u << 1,   // rendezvous, authentication
  kNet = 1u << 2,    // tcp transport
  kShm = 1u << 3,    // shared-memory transport
  kColl = 1u << 4,   // collectives and the algorithm each call used
  kTune = 1u << 5,   // algorithm selection
  kAll = ~0u
};

/// True when a message of this level and subsystem would be printed.
bool enabled(Level level, unsigned subsys);
/// Prints one line (already formatted) with the standard prefix.
void write(Level level, unsigned subsys, const std::string& message);
/// Reads the COIL_DEBUG* variables again; later lines follow them (a log
/// file open until now is closed).
void reload();
/// The rank shown in this thread's log lines (-1: none).
void setThreadRank(int rank);

template <typename... Parts>
void print(Level level, unsigned subsys, const Parts&... parts) {
  if (!enabled(level, subsys)) return;
  std::ostringstream os;
  (os << ... << parts);
  write(level, subsys, os.str());
}

}  // namespace coil::log

#define COIL_WARN(subsys, ...) ::coil::log::print(::coil::log::Level::Warn, ::coil::log::subsys, __VA_ARGS__)
#define COIL_INFO(subsys, ...) ::coil::log::print(::coil::log::Level::Info, ::coil::log::subsys, __VA_ARGS__)
#define COIL_TRACE(subsys, ...) ::coil::log::print(::coil::log::Level::Trace, ::coil::log::subsys, __VA_ARGS__)
