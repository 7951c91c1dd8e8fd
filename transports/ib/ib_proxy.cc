#include "transports/ib/ib_proxy.h"

#include <poll.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "core/thread_name.h"
#include "topo/binding.h"

namespace coil::transport::ib {

namespace {
// A safety net, not the mechanism: every event that matters wakes poll().
constexpr int kPollMs = 100;
constexpr int kBatch = 32;
}  // namespace

IbProxy::IbProxy(int rank, std::shared_ptr<IbDevice> device, ibv_cq* cq,
                 std::shared_ptr<ProxyWaker> waker)
    : rank_(rank), device_(std::move(device)), cq_(cq), waker_(std::move(waker)) {}

IbProxy::~IbProxy() { stop(); }

void IbProxy::start(std::vector<std::shared_ptr<IbChannel>> channels) {
  channels_ = std::move(channels);
  thread_ = std::thread([this] { run(); });
  nameOwnThread(thread_, "ib", rank_);
  topo::bindOwnThread(thread_, "ib progress");  // COIL_BIND=auto: next to the rank's CPUs
}

void IbProxy::stop() noexcept {
  stop_.store(true, std::memory_order_release);
  waker_->wake();
  if (thread_.joinable()) thread_.join();
}

void IbProxy::run() noexcept {
  log::setThreadRank(rank_);
  try {
    while (!stop_.load(std::memory_order_acquire)) {
      // Completions first: a peer's last data lands before its socket closes.
      const bool completed = drainCompletions();
      const bool posted = pumpAll();
      if (!completed && !posted) sleepUntilWork();
    }
  } catch (const std::exception& e) {
    failAll(std::string("the progress thread failed: ") + e.what());
  }
}

bool IbProxy::drainCompletions() {
  ibv_wc wcs[kBatch];
  bool any = false;
  for (;;) {
    const int n = ibv_poll_cq(cq_, kBatch, wcs);
    if (n < 0) {
      failAll("ibv_poll_cq failed");
      return false;
    }
    for (int i = 0; i < n; ++i) {
      const auto index = static_cast<size_t>(wcs[i].wr_id >> 32);
      if (index < channels_.size()) channels_[index]->complete(wcs[i]);
    }
    any = any || n > 0;
    if (n < kBatch) return any;
  }
}

bool IbProxy::pumpAll() {
  bool any = false;
  for (auto& ch : channels_) any = ch->pump() || any;
  return any;
}

void IbProxy::sleepUntilWork() {
  waker_->beginSleep();
  // Arm, then look again: a completion that came before the arming raises
  // no event, and a publish before beginSleep() raises no kick.
  if (ibv_req_notify_cq(cq_, 0) != 0) failAll("ibv_req_notify_cq failed");
  if (drainCompletions() || pumpAll()) {
    waker_->endSleep();
    return;
  }
  std::vector<pollfd> fds;
  fds.push_back({waker_->fd(), POLLIN, 0});
  fds.push_back({device_->completionChannel()->fd, POLLIN, 0});
  fds.push_back({device_->context()->async_fd, POLLIN, 0});
  std::vector<IbChannel*> watched;  // watched[i] owns fds[3 + i]
  for (auto& ch : channels_)
    if (!ch->failed() && ch->socketFd() >= 0) {
      fds.push_back({ch->socketFd(), POLLIN, 0});
      watched.push_back(ch.get());
    }
  const int rc = ::poll(fds.data(), fds.size(), kPollMs);
  waker_->endSleep();
  if (rc <= 0) return;
  if (fds[1].revents & POLLIN) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (device_->api().getCqEvent(device_->completionChannel(), &cq, &context) == 0)
      device_->api().ackCqEvents(cq, 1);
  }
  if (fds[2].revents & POLLIN) handleAsyncEvents();
  // Sockets last: drain what the peer sent before its close counts.
  drainCompletions();
  for (size_t i = 0; i < watched.size(); ++i)
    if (fds[3 + i].revents != 0 && !watched[i]->failed()) watched[i]->socketEvent();
}

void IbProxy::handleAsyncEvents() {
  const VerbsApi& api = device_->api();
  ibv_async_event event;
  while (api.getAsyncEvent(device_->context(), &event) == 0) {
    const std::string what = api.eventTypeStr(event.event_type);
    switch (event.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
        for (auto& ch : channels_)
          if (ch->qpn() == event.element.qp->qp_num) ch->fail("queue pair error: " + what);
        break;
      case IBV_EVENT_CQ_ERR:
      case IBV_EVENT_DEVICE_FATAL:
      case IBV_EVENT_PORT_ERR:
        failAll(device_->description() + ": " + what);
        break;
      default:
        COIL_INFO(kNet, "ib: async event ", what);
    }
    api.ackAsyncEvent(&event);
  }
}

void IbProxy::failAll(const std::string& why) noexcept {
  for (auto& ch : channels_) ch->fail(why);
}

}  // namespace coil::transport::ib
