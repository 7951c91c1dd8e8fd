// IbProxy: the ib transport's progress thread, one per communicator.
//
// It polls the communicator's one completion queue and posts every
// channel's work: published send slots, credits for released receive
// slots. It never spins when there is nothing to do: it arms the CQ and
// sleeps in poll() over the CQ's event channel, the device's async event
// descriptor, the channels' liveness sockets and the ProxyWaker that
// Connection::kick() writes (proxy_waker.h).
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "transports/ib/ib_channel.h"
#include "transports/ib/ib_device.h"
#include "transports/proxy_waker.h"

namespace coil::transport::ib {

class IbProxy {
 public:
  /// `channels[i]` must have been built with index i and this proxy's waker.
  IbProxy(int rank, std::shared_ptr<IbDevice> device, ibv_cq* cq,
          std::shared_ptr<ProxyWaker> waker);
  ~IbProxy();
  IbProxy(const IbProxy&) = delete;
  IbProxy& operator=(const IbProxy&) = delete;

  /// Starts the thread over these channels (once).
  void start(std::vector<std::shared_ptr<IbChannel>> channels);
  /// Stops and joins the thread. Idempotent.
  void stop() noexcept;

 private:
  void run() noexcept;
  bool drainCompletions();
  bool pumpAll();
  void handleAsyncEvents();
  void sleepUntilWork();
  void failAll(const std::string& why) noexcept;

  int rank_;
  std::shared_ptr<IbDevice> device_;
  ibv_cq* cq_;
  std::shared_ptr<ProxyWaker> waker_;
  std::vector<std::shared_ptr<IbChannel>> channels_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace coil::transport::ib
