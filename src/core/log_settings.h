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

/// Settings for the values of COIL_DEBUG, COIL_DEBUG_SUBSYS and
/// COIL_DEBUG_FILE (each may be null: unset). Unknown level names keep the
/// default level; unknown subsystem names select nothing.
Settings parseSettings(const char* level, const char* subsystems, const char* file);

/// The settings the environment asks for now.
Settings settingsFromEnv();

}  // namespace coil::log
