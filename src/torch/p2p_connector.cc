#include "p2p_connector.h"

#include <c10/util/Exception.h>
#include <pthread.h>

#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "torch_compat.h"

namespace coil_torch {
namespace {

// How long one wait for the next request lasts before it is renewed. Long,
// since each timeout of a TCPStore wait logs a warning; stop() does not
// depend on it (it puts a request of its own).
constexpr std::chrono::minutes kWaitSlice{30};
const std::string kStop = "stop";

}  // namespace

Connector::Connector(c10::intrusive_ptr<c10d::Store> store, std::string prefix, int rank,
                     std::shared_ptr<JobConnectors> job, OnRequest onRequest)
    : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), job_(std::move(job)),
      onRequest_(std::move(onRequest)) {
  waitStore_ = torch_compat::cloneStore(store_);
  if (!waitStore_) waitStore_ = store_;  // a store that cannot be cloned holds no lock across waits
  store_->add(prefix_ + "/connectors", 1);  // counted in while it runs (leave() counts it out)
  if (job_ && !job_->countIn()) job_.reset();
  thread_ = std::thread([this] { loop(); });
  pthread_setname_np(thread_.native_handle(), "coil-torch-conn");
}

Connector::~Connector() { stop(); }

std::string Connector::keyFor(int destination, const std::string& what) const {
  return prefix_ + "/to" + std::to_string(destination) + "/" + what;
}

void Connector::request(int destination, const coilUniqueId& id) {
  std::string value = std::to_string(rank_) + " ";
  value.append(id.internal, sizeof id.internal);
  std::lock_guard<std::mutex> lock(requestMutex_);
  const int64_t n = store_->add(keyFor(destination, "count"), 1) - 1;
  store_->set(keyFor(destination, std::to_string(n)),
              std::vector<uint8_t>(value.begin(), value.end()));
}

void Connector::loop() {
  c10d::Store* waitStore = waitStore_.get();
  for (int64_t n = 0;; ++n) {
    const std::string key = keyFor(rank_, std::to_string(n));
    std::vector<uint8_t> value;
    for (;;) {
      try {
        waitStore->wait({key}, kWaitSlice);
        value = waitStore->get(key);
        break;
      } catch (const c10::DistNetworkError&) {
        // The store is gone (its host exited): nothing more will come, and
        // stop() must not call it either (torch logs every failed call).
        storeGone_.store(true);
        return;
      } catch (const c10::Error&) {
        if (stopping_.load()) return;
        // A slice ran out: wait again (not in a tight loop if the store
        // fails at once for another reason).
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    const std::string text(value.begin(), value.end());
    // At the stop request the store is left alone: its host (rank 0) may be
    // exiting already, and torch logs every call that finds it gone.
    if (text == kStop || stopping_.load()) return;
    try {
      waitStore->deleteKey(key);
    } catch (const c10::Error&) {
      // Kept: a few bytes.
    }
    const size_t space = text.find(' ');
    coilUniqueId id;
    if (space == std::string::npos || text.size() - space - 1 != sizeof id.internal) continue;
    std::memcpy(id.internal, text.data() + space + 1, sizeof id.internal);
    onRequest_(std::stoi(text.substr(0, space)), id);
  }
}

void Connector::stop(std::chrono::milliseconds waitForPeers) {
  if (stopping_.exchange(true)) return;
  // A wait that failed because the store's host exited (rank 0 under
  // mp.spawn or a launch by hand; torchrun's agent outlives the ranks) has
  // ended the thread already: asking the store again would only add
  // torch's warning about the lost connection to a normal shutdown.
  if (!storeGone_.load()) {
    try {
      std::lock_guard<std::mutex> lock(requestMutex_);
      const int64_t n = store_->add(keyFor(rank_, "count"), 1) - 1;
      store_->set(keyFor(rank_, std::to_string(n)),
                  std::vector<uint8_t>(kStop.begin(), kStop.end()));
    } catch (const c10::Error&) {
      // The store is unreachable: the thread's wait fails with it and returns.
    }
  }
  if (thread_.joinable()) thread_.join();
  if (storeGone_.load()) return;
  leave(waitForPeers);
  if (job_) job_->countOut();  // last: the store's host may leave once all are out
}

void Connector::leave(std::chrono::milliseconds waitForPeers) {
  const std::string allOut = prefix_ + "/connectors-stopped";
  try {
    if (waitStore_->add(prefix_ + "/connectors", -1) == 0) {
      waitStore_->set(allOut, std::vector<uint8_t>{1});
      return;
    }
    // A wait, not polling: the store pushes the mark to every waiter as it
    // is set, before its host can see it and exit, while a poll could be
    // in flight just as the host goes. (torch logs a wait that times out:
    // only when a peer is later than the grace.)
    if (waitForPeers.count() > 0) waitStore_->wait({allOut}, waitForPeers);
  } catch (const c10::Error&) {
    // A peer later than the grace, or the store's host gone: leave anyway.
  }
}

}  // namespace coil_torch
