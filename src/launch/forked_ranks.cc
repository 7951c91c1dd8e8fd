#include "launch/forked_ranks.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <thread>

#include "launch/quiet_threads.h"

namespace coil {
namespace {

[[noreturn]] void throwErrno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// Often enough that a test bounding how long a failure takes is not
// measuring this loop.
constexpr std::chrono::milliseconds kReapInterval{5};

// How long a fork waits, in all, for the process's other threads to sleep.
// Ranks forked as the rule says (before any thread) never wait; a thread
// that spins for good costs this once per ForkedRanks.
constexpr std::chrono::milliseconds kForkPatience{1000};

}  // namespace

bool ForkedRank::succeeded() const {
  return reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string ForkedRank::describe() const {
  const std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (overstayed) return who + " did not exit by its deadline (killed)";
  if (!reaped) return who + " is still running";
  if (WIFEXITED(status)) return who + " exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return who + " was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return who + " ended abnormally";
}

ForkedRanks::ForkedRanks(int firstRank, int endRank) {
  std::vector<int> readEnds;
  for (int r = firstRank; r < endRank; ++r) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      const int saved = errno;
      for (int fd : readEnds) close(fd);
      closePipes();
      errno = saved;
      throwErrno("pipe2");
    }
    readEnds.push_back(fds[0]);
    pipes_.push_back(fds[1]);
    children_.push_back(ForkedRank{.rank = r});
  }
  std::fflush(nullptr);  // nothing buffered may be printed twice
  const pid_t parent = getpid();
  // Another thread of this process (a test's leftover, a rendezvous root
  // made too early) may be inside a sanitizer's allocator: fork when they
  // all sleep (quiet_threads.h), waiting at most this long in all.
  const auto patienceEnds = Clock::now() + kForkPatience;
  for (size_t i = 0; i < children_.size(); ++i) {
    waitUntilOtherThreadsSleep(patienceEnds);
    const pid_t pid = fork();
    if (pid < 0) {
      const int saved = errno;
      for (int fd : readEnds) close(fd);
      killRemaining();
      closePipes();
      errno = saved;
      throwErrno("fork");
    }
    if (pid == 0) {
      // Die with the parent; it may already be gone by now.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      rank_ = children_[i].rank;
      childPipe_ = readEnds[i];
      for (size_t j = 0; j < readEnds.size(); ++j)
        if (j != i) close(readEnds[j]);
      closePipes();
      children_.clear();
      return;
    }
    children_[i].pid = pid;
  }
  for (int fd : readEnds) close(fd);
}

ForkedRanks::~ForkedRanks() {
  if (isChild()) {
    if (childPipe_ >= 0) close(childPipe_);
    return;
  }
  closePipes();
  killRemaining();
}

void ForkedRanks::closePipes() {
  for (int fd : pipes_)
    if (fd >= 0) close(fd);
  pipes_.clear();
}

void ForkedRanks::share(const void* data, size_t bytes) {
  // A write to a child that died first raises SIGPIPE, whose default action
  // would end this process: block it on this thread and discard it after.
  sigset_t sigpipe, old;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, &old);
  for (int fd : pipes_) {
    const char* p = static_cast<const char*>(data);
    size_t left = bytes;
    while (left > 0) {
      const ssize_t n = write(fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // that child died; its reaping reports it
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  const timespec now{};
  while (sigtimedwait(&sigpipe, nullptr, &now) == SIGPIPE) {
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  closePipes();
}

void ForkedRanks::abandon() { closePipes(); }

std::vector<ForkedRank> ForkedRanks::reapExited() {
  std::vector<ForkedRank> reaped;
  for (ForkedRank& c : children_) {
    if (c.reaped || c.pid <= 0) continue;
    int status = 0;
    if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
    c.reaped = true;
    c.status = status;
    reaped.push_back(c);
  }
  return reaped;
}

std::vector<ForkedRank> ForkedRanks::reapAll(Clock::time_point deadline) {
  std::vector<ForkedRank> reaped;
  for (;;) {
    for (const ForkedRank& c : reapExited()) reaped.push_back(c);
    bool running = false;
    for (const ForkedRank& c : children_) running = running || (!c.reaped && c.pid > 0);
    if (!running) return reaped;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(kReapInterval);
  }
  for (ForkedRank& c : children_)
    if (!c.reaped && c.pid > 0) c.overstayed = true;
  killRemaining();
  for (const ForkedRank& c : children_)
    if (c.overstayed) reaped.push_back(c);
  return reaped;
}

void ForkedRanks::killRemaining() {
  for (ForkedRank& c : children_) {
    if (c.reaped || c.pid <= 0) continue;
    kill(c.pid, SIGKILL);
    int status = 0;
    if (waitpid(c.pid, &status, 0) == c.pid) {
      c.reaped = true;
      c.status = status;
    }
  }
}

std::vector<pid_t> ForkedRanks::pids() const {
  std::vector<pid_t> out;
  for (const ForkedRank& c : children_) out.push_back(c.pid);
  return out;
}

bool ForkedRanks::allSucceeded() const {
  for (const ForkedRank& c : children_)
    if (!c.succeeded()) return false;
  return true;
}

ForkedRanks::Handover ForkedRanks::receive(void* data, size_t bytes,
                                           std::chrono::milliseconds timeout) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  const auto deadline = Clock::now() + timeout;
  while (got < bytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Handover::TimedOut;
    pollfd pfd{childPipe_, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Handover::ParentClosed;
    if (ready == 0) continue;
    const ssize_t n = read(childPipe_, p + got, bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Handover::ParentClosed;
    got += static_cast<size_t>(n);
  }
  close(childPipe_);
  childPipe_ = -1;
  return Handover::Received;
}

void ForkedRanks::exitChild(int status) {
  std::fflush(nullptr);
  _exit(status);
}

}  // namespace coil
