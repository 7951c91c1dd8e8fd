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
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "coil.h"

namespace coil_torch {

class Connector {
 public:
  using OnRequest = std::function<void(int source, const coilUniqueId& id)>;
  /// Starts waiting for requests to `rank` under `prefix` in `store`.
  Connector(c10::intrusive_ptr<c10d::Store> store, std::string prefix, int rank,
            OnRequest onRequest);
  /// As stop().
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  /// Asks rank `destination` to join `id` as the receiver. Any thread.
  void request(int destination, const coilUniqueId& id);

  /// Ends the thread. Idempotent.
  void stop();

 private:
  std::string keyFor(int destination, const std::string& what) const;
  void loop(c10::intrusive_ptr<c10d::Store> waitStore);

  c10::intrusive_ptr<c10d::Store> store_;
  const std::string prefix_;
  const int rank_;
  const OnRequest onRequest_;
  std::mutex requestMutex_;  // the store's calls from several SendLinks
  std::atomic<bool> stopping_{false};
  std::atomic<bool> storeGone_{false};  // the thread's wait lost the store for good
  std::thread thread_;
};

}  // namespace coil_torch
