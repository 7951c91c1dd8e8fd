// A fresh directory under /tmp for one test, removed with everything in it
// at scope exit: a stand-in for a home directory.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace coil::test {

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/coil-test-XXXXXX";
    if (mkdtemp(pattern) == nullptr) failErrno("mkdtemp", errno);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// Permission bits of `path` (stat follows links), or -1 if it is missing.
inline int modeOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

}  // namespace coil::test
