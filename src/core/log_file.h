// COIL_DEBUG_FILE: where log lines go instead of stderr. The name may hold
// %h (this host's name) and %p (this process's id), as NCCL_DEBUG_FILE's
// does, so that every rank of a launch can write its own file.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace coil::log {

/// `pattern` with %h replaced by `host`, %p by `pid` and %% by %. Any other
/// % sequence is kept as written.
std::string expandLogPath(std::string_view pattern, std::string_view host, long pid);

/// The stream log lines are written to. Not thread-safe: the log's write
/// lock guards it.
class LogSink {
 public:
  LogSink() = default;
  ~LogSink() { close(); }
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  /// Sends later lines to the file `pattern` names (stderr if empty),
  /// opened at the next stream() call. The pattern in use already keeps its
  /// file open (and its lines).
  void setPattern(std::string pattern);
  /// The file to write to, opened (truncated) on first use. A forked child
  /// whose pattern names a different file (%p) opens its own; one whose
  /// name is the same keeps writing to its parent's. Falls back to stderr,
  /// saying so once, when the file cannot be opened.
  std::FILE* stream(std::string_view host);

 private:
  void close();

  std::string pattern_;
  std::string openedPath_;
  std::FILE* file_ = nullptr;
  bool failed_ = false;
};

}  // namespace coil::log
