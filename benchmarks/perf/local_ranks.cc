#include "local_ranks.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace coil_perf {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void throwErrno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

LocalRanks::LocalRanks(int nranks) : nranks_(nranks) {
  std::vector<int> readEnds;
  for (int r = 1; r < nranks; ++r) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throwErrno("pipe2");
    Child child;
    child.rank = r;
    child.idPipe = fds[1];
    readEnds.push_back(fds[0]);
    children_.push_back(child);
  }
  std::fflush(nullptr);  // nothing buffered may be printed twice
  const pid_t parent = getpid();
  for (size_t i = 0; i < children_.size(); ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      const int saved = errno;
      killRemaining();
      errno = saved;
      throwErrno("fork");
    }
    if (pid == 0) {
      // Die with the parent; it may already be gone by now.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      rank_ = children_[i].rank;
      childPipe_ = readEnds[i];
      for (size_t j = 0; j < readEnds.size(); ++j) {
        if (j != i) close(readEnds[j]);
      }
      for (Child& c : children_) close(c.idPipe);
      children_.clear();
      return;
    }
    children_[i].pid = pid;
  }
  for (int fd : readEnds) close(fd);
}

LocalRanks::~LocalRanks() {
  if (rank_ != 0) {
    if (childPipe_ >= 0) close(childPipe_);
    return;
  }
  mainDone_ = true;
  if (watcher_.joinable()) watcher_.join();
  for (Child& c : children_) {
    if (c.idPipe >= 0) close(c.idPipe);
  }
  killRemaining();
}

void LocalRanks::share(const void* data, size_t bytes) {
  for (Child& c : children_) {
    const char* p = static_cast<const char*>(data);
    size_t left = bytes;
    while (left > 0) {
      const ssize_t n = write(c.idPipe, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the child died; the watcher will report it
      p += n;
      left -= static_cast<size_t>(n);
    }
    close(c.idPipe);
    c.idPipe = -1;
  }
  startWatcher();
}

void LocalRanks::abandon() {
  for (Child& c : children_) {
    if (c.idPipe >= 0) close(c.idPipe);
    c.idPipe = -1;
  }
  startWatcher();
}

void LocalRanks::receive(void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (got < bytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) throw std::runtime_error("nothing from rank 0 within 60 s");
    pollfd pfd{childPipe_, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throwErrno("poll");
    if (ready == 0) continue;
    const ssize_t n = read(childPipe_, p + got, bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throwErrno("read");
    if (n == 0) throw std::runtime_error("rank 0 gave up before the run started");
    got += static_cast<size_t>(n);
  }
  close(childPipe_);
  childPipe_ = -1;
}

void LocalRanks::startWatcher() {
  if (!watcher_.joinable() && !children_.empty()) watcher_ = std::thread([this] { watch(); });
}

void LocalRanks::watch() {
  bool failureSeen = false;
  Clock::time_point giveUpAt{};
  while (!mainDone_) {
    if (reapExited() > 0 && !failureSeen) {
      failureSeen = true;
      giveUpAt = Clock::now() + kGraceAfterChildFailure;
    }
    if (failureSeen && Clock::now() >= giveUpAt && !mainDone_) {
      std::fprintf(stderr,
                   "%s: a rank failed %lld s ago and rank 0 is still blocked: the library did "
                   "not report the lost peer; killing the remaining ranks\n",
                   program_invocation_short_name,
                   static_cast<long long>(kGraceAfterChildFailure.count()));
      killRemaining();
      std::fflush(nullptr);
      _exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int LocalRanks::reapExited() {
  std::lock_guard<std::mutex> lock(mutex_);
  int failed = 0;
  for (Child& c : children_) {
    if (c.reaped || c.pid <= 0) continue;
    int status = 0;
    const pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r != c.pid) continue;
    c.reaped = true;
    c.status = status;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      ++failed;
      std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, describe(c).c_str());
    }
  }
  return failed;
}

void LocalRanks::killRemaining() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Child& c : children_) {
    if (c.reaped || c.pid <= 0) continue;
    kill(c.pid, SIGKILL);
    int status = 0;
    if (waitpid(c.pid, &status, 0) == c.pid) {
      c.reaped = true;
      c.status = status;
    }
  }
}

std::string LocalRanks::describe(const Child& c) {
  std::string who = "rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) + ")";
  if (WIFEXITED(c.status)) return who + " exited with status " + std::to_string(WEXITSTATUS(c.status));
  if (WIFSIGNALED(c.status)) return who + " was killed by signal " + std::to_string(WTERMSIG(c.status)) + " (" + strsignal(WTERMSIG(c.status)) + ")";
  return who + " ended abnormally";
}

bool LocalRanks::waitForChildren(bool selfFailed) {
  if (rank_ != 0) return true;
  mainDone_ = true;
  if (watcher_.joinable()) watcher_.join();
  const auto deadline = Clock::now() + (selfFailed ? std::chrono::seconds(10) : kExitDeadline);
  for (;;) {
    reapExited();
    bool allReaped = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const Child& c : children_) allReaped = allReaped && (c.reaped || c.pid <= 0);
    }
    if (allReaped) break;
    if (Clock::now() >= deadline) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const Child& c : children_) {
        if (!c.reaped) std::fprintf(stderr, "%s: rank %d (pid %d) did not exit in time; killing it\n",
                                         program_invocation_short_name, c.rank, static_cast<int>(c.pid));
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  killRemaining();
  bool allOk = true;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Child& c : children_) {
    allOk = allOk && c.reaped && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
  }
  return allOk;
}

}  // namespace coil_perf
