// What the COIL_DEBUG* variables ask the log for, parsed without touching
// the environment so that the rules can be tested on their own.
#pragma once

#include <string>

#include "core/log.h"

namespace coil::log {

/// The subsystems printed when COIL_DEBUG_SUBSYS is not set: init, bootstrap
/// and per-peer connection lines, as NCCL's default. COLL and TUNE print a
/// line per collective call (a 2-rank sweep printed thousands), so they come
/// only when asked for by name or with ALL.
constexpr unsigned kDefaultSubsystems = kAll & ~(kColl | kTune);

struct Settings {
  Level level = Level::Warn;
  unsigned mask = kDefaultSubsystems;
  std::string filePattern;  ///< COIL_DEBUG_FILE; empty: stderr
};

/// Whether a line of `level` in `subsys` is printed under `threshold` and
/// `mask`. Errors and warnings print whatever the mask (as NCCL's WARN):
/// the mask only thins out INFO and TRACE, so leaving COLL out of the
/// default never hides a warning such as the flight recorder's dump.
constexpr bool shows(Level level, unsigned subsys, Level threshold, unsigned mask) {
  return level <= threshold && (level <= Level::Warn || (subsys & mask) != 0);
}

/// Settings for the values of COIL_DEBUG, COIL_DEBUG_SUBSYS and
/// COIL_DEBUG_FILE (each may be null: unset). Unknown level names keep the
/// default level; unknown subsystem names select nothing.
Settings parseSettings(const char* level, const char* subsystems, const char* file);

/// The settings the environment asks for now.
Settings settingsFromEnv();

}  // namespace coil::log
