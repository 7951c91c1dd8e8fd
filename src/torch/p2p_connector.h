// How a rank learns that a peer wants to send to it: requests through the
// process group's store.
//
// A SendLink's first message announces its new communicator: it takes the
// next number n of the receiving rank (store add on "<prefix>/to<dst>/count")
// and puts "<src rank> <unique id>" under "<prefix>/to<dst>/<n>". Each rank's
// Connector thread waits for its own numbers in turn (on a clone of the
// store: a TCPStore client holds its lock for as long as a wait lasts, and
// the group's own store must stay free) and starts a RecvLink per request.
// So a direction is set up when first used, by threads on both sides,
// whatever else either rank is doing; no collective call is involved.
// To stop, a rank puts "stop" under its own next number.
//
// Leaving: the store's host (rank 0 when a job is launched by hand or by
// mp.spawn) must not exit while a peer's connector still waits on its
// store, or torch logs that peer's lost wait with a stack trace. So each
// connector counts itself in "<prefix>/connectors" while it runs; at a
// shutdown a rank stops its own, counts itself out and then waits (a
// short grace) until the count is zero, which the last one out marks under
// "<prefix>/connectors-stopped". Ranks reaching destroy_process_group
// within the grace of one another therefore leave quietly. A rank with no
// connector (one that never sent or received) makes no store call at
// shutdown. Every connector is also counted in its job's JobConnectors, for
// a store host that has no connector in the group (job_connectors.h).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "coil.h"
#include "job_connectors.h"

namespace coil_torch {

/// How long a shutdown waits for the other connectors of a group, and the
/// store's host for those of the job.
inline constexpr std::chrono::seconds kConnectorsGrace{3};

class Connector {
 public:
  using OnRequest = std::function<void(int source, const coilUniqueId& id)>;
  /// Starts waiting for requests to `rank` under `prefix` in `store`, and
  /// counts itself in `job` (may be null).
  Connector(c10::intrusive_ptr<c10d::Store> store, std::string prefix, int rank,
            std::shared_ptr<JobConnectors> job, OnRequest onRequest);
  /// As stop().
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  /// Asks rank `destination` to join `id` as the receiver. Any thread.
  void request(int destination, const coilUniqueId& id);

  /// Ends the thread and counts this connector out; then, for a shutdown
  /// (`waitForPeers` > 0), waits up to that long for every other connector
  /// of the group to be out too. Idempotent.
  void stop(std::chrono::milliseconds waitForPeers = std::chrono::milliseconds(0));

 private:
  std::string keyFor(int destination, const std::string& what) const;
  void loop();
  /// Counts this connector out, then waits as stop() says.
  void leave(std::chrono::milliseconds waitForPeers);

  c10::intrusive_ptr<c10d::Store> store_;
  // The thread's own connection: a TCPStore client holds its lock for as
  // long as a wait lasts, and the group's own store must stay free.
  c10::intrusive_ptr<c10d::Store> waitStore_;
  const std::string prefix_;
  const int rank_;
  std::shared_ptr<JobConnectors> job_;  // null unless counted in there
  const OnRequest onRequest_;
  std::mutex requestMutex_;  // the store's calls from several SendLinks
  std::atomic<bool> stopping_{false};
  std::atomic<bool> storeGone_{false};  // the thread's wait lost the store for good
  std::thread thread_;
};

}  // namespace coil_torch
