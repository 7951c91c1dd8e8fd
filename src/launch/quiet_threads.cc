#include "launch/quiet_threads.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

namespace coil {
namespace {

// The state letter of thread `tid` (/proc/self/task/TID/stat: "pid (comm) S
// ..."; comm may hold spaces and parentheses, so the state follows the last
// ')'), or 0 when it cannot be read (the thread just ended).
char threadState(const char* tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');
  return close != nullptr && close[1] == ' ' ? close[2] : 0;
}

// Whether another thread of this process is running or runnable (false
// when /proc cannot tell).
bool anotherThreadRuns() {
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return false;
  const long self = ::syscall(SYS_gettid);
  bool runs = false;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] == '.' || std::atol(entry->d_name) == self) continue;
    if (threadState(entry->d_name) == 'R') {
      runs = true;
      break;
    }
  }
  ::closedir(tasks);
  return runs;
}

}  // namespace

bool waitUntilOtherThreadsSleep(std::chrono::steady_clock::time_point deadline) {
  while (anotherThreadRuns()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

pid_t forkWhenQuiet(std::chrono::milliseconds patience) {
  waitUntilOtherThreadsSleep(std::chrono::steady_clock::now() + patience);
  return ::fork();
}

}  // namespace coil
