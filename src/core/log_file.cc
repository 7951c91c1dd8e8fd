#include "core/log_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace coil::log {

std::string expandLogPath(std::string_view pattern, std::string_view host, long pid) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    switch (pattern[i + 1]) {
      case 'h': out += host; ++i; break;
      case 'p': out += std::to_string(pid); ++i; break;
      case '%': out += '%'; ++i; break;
      default: out += '%'; break;
    }
  }
  return out;
}

void LogSink::setPattern(std::string pattern) {
  // The same file again (coilResetDebugInit that changed the level): keep
  // it open, so that reopening it does not truncate the lines written so far.
  if (pattern == pattern_ && !failed_) return;
  close();
  pattern_ = std::move(pattern);
  failed_ = false;
}

void LogSink::close() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  openedPath_.clear();
}

std::FILE* LogSink::stream(std::string_view host) {
  if (pattern_.empty() || failed_) return stderr;
  const std::string path = expandLogPath(pattern_, host, static_cast<long>(getpid()));
  if (file_ != nullptr && path == openedPath_) return file_;
  close();  // a forked child whose name differs: its copy of the parent's stream
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    failed_ = true;
    std::fprintf(stderr, "coil: COIL_DEBUG_FILE: cannot open %s: %s; logging to stderr\n",
                 path.c_str(), std::strerror(errno));
    return stderr;
  }
  openedPath_ = path;
  return file_;
}

}  // namespace coil::log
