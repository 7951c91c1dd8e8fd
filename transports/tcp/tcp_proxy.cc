#include "transports/tcp/tcp_proxy.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_name.h"
#include "topo/binding.h"
#include "transports/tcp/tcp_connection.h"

namespace coil::transport::tcp {

// ---- TcpProxy ----------------------------------------------------------------

TcpProxy::TcpProxy(int rank) : rank_(rank), waker_(std::make_shared<ProxyWaker>()) {}

TcpProxy::~TcpProxy() { stop(); }

void TcpProxy::add(const std::vector<std::shared_ptr<TcpChannel>>& channels) {
  if (channels.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_)
      fail(coilInvalidUsage, "tcp: the proxy thread is not running (transport shut down, or it failed: see earlier warnings)");
    incoming_.insert(incoming_.end(), channels.begin(), channels.end());
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { run(); });
      nameOwnThread(thread_, "tcp", rank_);
      topo::bindOwnThread(thread_, "tcp proxy");  // COIL_BIND=auto: next to the rank's CPUs
    }
  }
  waker_->wake();
}

void TcpProxy::stop() noexcept {
  std::lock_guard<std::mutex> stopping(stopMutex_);
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    thread = std::move(thread_);
  }
  stop_.store(true, std::memory_order_seq_cst);
  waker_->wake();
  if (thread.joinable()) thread.join();
  // The thread is gone: its connections can no longer move, so end their waits.
  for (auto& ch : channels_) ch->close();
  channels_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& ch : incoming_) ch->close();
  incoming_.clear();
}

bool TcpProxy::adoptNew() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (incoming_.empty()) return false;
  channels_.insert(channels_.end(), incoming_.begin(), incoming_.end());
  incoming_.clear();
  return true;
}

void TcpProxy::run() noexcept {
  log::setThreadRank(rank_);
  try {
    loop();
  } catch (const std::exception& e) {
    COIL_WARN(kNet, "tcp proxy thread stopped: ", e.what());
  }
  // Whatever ended the loop, nothing moves from now on: refuse new channels
  // and end every wait.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
  }
  adoptNew();
  for (auto& ch : channels_) ch->close();
}

void TcpProxy::loop() {
  std::vector<pollfd> fds;
  std::vector<PollOwner> owners;
  while (!stop_.load(std::memory_order_acquire)) {
    adoptNew();
    bool moved = false;
    for (auto& ch : channels_) moved |= ch->progress();
    // Drop what is over; shutting its sockets tells the peer at once.
    auto over = std::remove_if(channels_.begin(), channels_.end(), [](const auto& ch) {
      if (!ch->finished()) return false;
      ch->shutdownSockets();
      return true;
    });
    channels_.erase(over, channels_.end());
    if (moved) continue;

    // Nothing moved: announce the sleep, then re-check everything a kick or
    // add() could have changed, so that no wake-up falls between the two.
    waker_->beginSleep();
    bool work = stop_.load(std::memory_order_seq_cst);
    if (!work) {
      std::lock_guard<std::mutex> lock(mutex_);
      work = !incoming_.empty();
    }
    for (size_t i = 0; !work && i < channels_.size(); ++i) work = channels_[i]->wantsAttempt();
    if (work) {
      waker_->endSleep();
      continue;
    }
    fds.clear();
    owners.clear();
    fds.push_back(pollfd{waker_->fd(), POLLIN, 0});
    for (auto& ch : channels_) ch->addPollFds(fds, owners);
    int rc = ::poll(fds.data(), fds.size(), -1);
    int err = errno;
    waker_->endSleep();
    if (rc < 0) {
      if (err == EINTR) continue;
      failErrno("tcp proxy: poll", err);
    }
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents != 0) owners[i - 1].channel->onPollEvents(owners[i - 1].socket, fds[i].revents);
  }
}

}  // namespace coil::transport::tcp
