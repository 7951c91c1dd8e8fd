// A directory tree made for one test (a fake /sys), removed afterwards.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace coil::topo::test {

class FakeTree {
 public:
  FakeTree() {
    std::string pattern = (std::filesystem::temp_directory_path() / "coil-topo-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << pattern;
    root_ = pattern;
  }
  ~FakeTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  FakeTree(const FakeTree&) = delete;
  FakeTree& operator=(const FakeTree&) = delete;

  const std::string& root() const { return root_; }

  /// Writes `content` (a newline added, as sysfs ends its values) to root/relative.
  void write(const std::string& relative, const std::string& content) const {
    const std::filesystem::path file = std::filesystem::path(root_) / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << content << "\n";
  }
  void mkdir(const std::string& relative) const {
    std::filesystem::create_directories(std::filesystem::path(root_) / relative);
  }
  void symlink(const std::string& target, const std::string& relative) const {
    const std::filesystem::path link = std::filesystem::path(root_) / relative;
    std::filesystem::create_directories(link.parent_path());
    std::filesystem::create_symlink(target, link);
  }

 private:
  std::string root_;
};

}  // namespace coil::topo::test
