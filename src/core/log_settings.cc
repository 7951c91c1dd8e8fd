#include "core/log_settings.h"

#include <strings.h>

#include <cstdlib>

namespace coil::log {
namespace {

unsigned subsysBit(const std::string& name) {
  static const struct { const char* name; unsigned bit; } kNames[] = {
      {"INIT", kInit}, {"BOOT", kBoot}, {"NET", kNet},  {"SHM", kShm},
      {"COLL", kColl}, {"TUNE", kTune}, {"ALL", kAll}};
  for (const auto& n : kNames)
    if (strcasecmp(n.name, name.c_str()) == 0) return n.bit;
  return 0;
}

// "A,B,C" selects those; "^A,B" selects all but those.
unsigned parseSubsystems(std::string list) {
  const bool exclude = !list.empty() && list[0] == '^';
  if (exclude) list.erase(0, 1);
  unsigned mask = 0;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    mask |= subsysBit(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return exclude ? ~mask : mask;
}

}  // namespace

Settings parseSettings(const char* level, const char* subsystems, const char* file) {
  Settings out;
  if (level != nullptr) {
    if (!strcasecmp(level, "INFO")) out.level = Level::Info;
    else if (!strcasecmp(level, "TRACE")) out.level = Level::Trace;
    else if (!strcasecmp(level, "WARN")) out.level = Level::Warn;
    else if (!strcasecmp(level, "ERROR") || !strcasecmp(level, "NONE")) out.level = Level::Error;
  }
  if (subsystems != nullptr) out.mask = parseSubsystems(subsystems);
  if (file != nullptr) out.filePattern = file;
  return out;
}

Settings settingsFromEnv() {
  return parseSettings(std::getenv("COIL_DEBUG"), std::getenv("COIL_DEBUG_SUBSYS"),
                       std::getenv("COIL_DEBUG_FILE"));
}

}  // namespace coil::log
