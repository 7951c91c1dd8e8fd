// Runs a piece of a test in a forked child with its own environment and
// its stderr captured in a file: coil reads COIL_DEBUG* once per process,
// so each setting the tests compare needs a process of its own.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "launch/quiet_threads.h"

namespace coil_test {

struct ChildResult {
  int exitCode = -1;   ///< -1 if the child did not exit normally
  std::string stderrText;
  pid_t pid = -1;
};

/// Forks; the child sets `env` (an empty value unsets), sends stderr to a
/// file, runs `body` and exits with its return value. Returns the child's
/// exit code, its stderr and its pid.
inline ChildResult runInChild(const std::vector<std::pair<std::string, std::string>>& env,
                              const std::function<int()>& body) {
  char path[] = "/tmp/coil-logtest-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return {};
  ChildResult result;
  result.pid = coil::forkWhenQuiet();
  if (result.pid == 0) {
    for (const auto& [name, value] : env) {
      if (value.empty()) unsetenv(name.c_str());
      else setenv(name.c_str(), value.c_str(), 1);
    }
    dup2(fd, 2);
    _exit(body());
  }
  int status = 0;
  waitpid(result.pid, &status, 0);
  if (WIFEXITED(status)) result.exitCode = WEXITSTATUS(status);
  close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  result.stderrText = text.str();
  unlink(path);
  return result;
}

/// Lines of `text` that contain `needle` ("" counts every line).
inline int countLines(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

}  // namespace coil_test
