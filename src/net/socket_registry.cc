#include "net/socket_registry.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/fork_guard.h"

namespace coil {
namespace {

void releaseInChild() noexcept;

// Built when libcoil loads, never destroyed: the atfork handler and late
// destructors (sockets closed at exit) use them. Not function-local
// statics: the first socket is often made on one of coil's threads (the
// rendezvous root) while the application may fork on another (core/log.cc).
std::vector<int>* const gListed = new std::vector<int>;
std::mutex* const gMutex = [] {
  auto* mutex = new std::mutex;
  guardAcrossFork(*mutex);
  pthread_atfork(nullptr, nullptr, releaseInChild);
  return mutex;
}();

// Runs in the child, single-threaded; the fork guard held gMutex across the
// fork, so the list is whole. Only async-signal-safe calls.
void releaseInChild() noexcept {
  if (gListed->empty()) return;
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) return;  // no descriptor left: the child keeps its copies, as before
  for (int fd : *gListed) ::dup3(devnull, fd, O_CLOEXEC);
  ::close(devnull);
}

}  // namespace

void listSocket(int fd) {
  if (fd < 0) return;
  std::lock_guard lock(*gMutex);
  gListed->push_back(fd);
}

void closeListedSocket(int fd) {
  if (fd < 0) return;
  std::lock_guard lock(*gMutex);
  std::vector<int>& fds = *gListed;
  auto it = std::find(fds.begin(), fds.end(), fd);
  if (it != fds.end()) {
    *it = fds.back();
    fds.pop_back();
  }
  ::close(fd);
}

}  // namespace coil
