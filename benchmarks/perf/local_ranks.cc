#include "local_ranks.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>

namespace coil_perf {

using coil::ForkedRank;
using coil::ForkedRanks;

LocalRanks::LocalRanks(int nranks) : nranks_(nranks), forked_(1, nranks) {}

LocalRanks::~LocalRanks() { stopWatcher(); }

void LocalRanks::share(const void* data, size_t bytes) {
  forked_.share(data, bytes);
  startWatcher();
}

void LocalRanks::abandon() {
  forked_.abandon();
  startWatcher();
}

void LocalRanks::receive(void* data, size_t bytes) {
  switch (forked_.receive(data, bytes, std::chrono::seconds(60))) {
    case ForkedRanks::Handover::Received: return;
    case ForkedRanks::Handover::TimedOut: throw std::runtime_error("nothing from rank 0 within 60 s");
    case ForkedRanks::Handover::ParentClosed:
      throw std::runtime_error("rank 0 gave up before the run started");
  }
}

void LocalRanks::startWatcher() {
  if (!watcher_.joinable() && !forked_.children().empty())
    watcher_ = std::thread([this] { watch(); });
}

void LocalRanks::stopWatcher() {
  mainDone_ = true;
  if (watcher_.joinable()) watcher_.join();
}

// The main thread leaves forked_ to this thread from share()/abandon()
// until stopWatcher() has joined it.
void LocalRanks::watch() {
  bool failureSeen = false;
  ForkedRanks::Clock::time_point giveUpAt{};
  while (!mainDone_) {
    if (reportFailures(forked_.reapExited()) > 0 && !failureSeen) {
      failureSeen = true;
      giveUpAt = ForkedRanks::Clock::now() + kGraceAfterChildFailure;
    }
    if (failureSeen && ForkedRanks::Clock::now() >= giveUpAt && !mainDone_) {
      std::fprintf(stderr,
                   "%s: a rank failed %lld s ago and rank 0 is still blocked: the library did "
                   "not report the lost peer; killing the remaining ranks\n",
                   program_invocation_short_name,
                   static_cast<long long>(kGraceAfterChildFailure.count()));
      forked_.killRemaining();
      std::fflush(nullptr);
      _exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int LocalRanks::reportFailures(const std::vector<ForkedRank>& reaped) {
  int failed = 0;
  for (const ForkedRank& c : reaped) {
    if (c.succeeded()) continue;
    ++failed;
    std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, c.describe().c_str());
  }
  return failed;
}

bool LocalRanks::waitForChildren(bool selfFailed) {
  if (forked_.isChild()) return true;
  stopWatcher();
  const auto deadline =
      ForkedRanks::Clock::now() + (selfFailed ? std::chrono::seconds(10) : kExitDeadline);
  reportFailures(forked_.reapAll(deadline));
  return forked_.allSucceeded();
}

}  // namespace coil_perf
