// CoilBackend::monitoredBarrier: which ranks did not arrive, through the store.
//
// Keys, under this backend's own store prefix and the barrier's number n:
//   <key>/monitored_barrier/<n>/arrived/<rank>   set by each rank but 0 on arrival
//   <key>/monitored_barrier/<n>/release          set by rank 0 once all arrived
// Every rank numbers its barriers alike, so one that skipped a barrier is a
// number behind from then on (as with gloo, where the barrier's messages
// would then pair up wrongly): a failed monitored barrier is a diagnosis,
// not something to carry on from.
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>
#include <vector>

#include "coil_backend.h"

namespace coil_torch {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds leftUntil(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                    deadline - Clock::now()));
}

// Whether `key` appears in `store` before `deadline` (a key already there
// counts even when the time is up).
bool appears(c10d::Store& store, const std::string& key, Clock::time_point deadline) {
  std::chrono::milliseconds left = leftUntil(deadline);
  if (left.count() == 0) return store.check({key});
  try {
    store.wait({key}, left);
    return true;
  } catch (const c10::Error&) {
    return store.check({key});  // timed out (the stores raise different types)
  }
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

void CoilBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  commRef();  // raises if shut down
  const std::chrono::milliseconds timeout =
      opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  TORCH_CHECK(timeout.count() >= 0, "coil backend: monitored_barrier: negative timeout");
  const Clock::time_point deadline = Clock::now() + timeout;
  const std::string base =
      storeKey_ + "/monitored_barrier/" + std::to_string(monitoredBarriers_++) + "/";
  auto arrivedKey = [&](int r) { return base + "arrived/" + std::to_string(r); };
  const std::string releaseKey = base + "release";

  if (rank_ != 0) {
    store_->set(arrivedKey(rank_), std::vector<uint8_t>{1});
    // The wording is gloo's, which torch's tests and users' scripts match.
    if (!appears(*store_, releaseKey, deadline))
      C10_THROW_ERROR(DistBackendError,
                      c10::str("coil backend: [Rank ", rank_, "]: Rank ", rank_,
                               " successfully reached monitoredBarrier, but received errors while "
                               "waiting for send/recv from rank 0: no release within ",
                               timeout.count(), " ms (rank 0 has not arrived, or found ranks "
                               "missing: see rank 0's error)"));
    return;
  }
  std::vector<int> missing;
  for (int r = 1; r < size_; ++r) {
    // As gloo: rank 0's own time running out before it has seen every rank
    // is reported as such (unless it is to name all missing ranks).
    if (!waitAllRanks && leftUntil(deadline).count() == 0 && !store_->check({arrivedKey(r)}))
      C10_THROW_ERROR(DistBackendError,
                      c10::str("coil backend: [Rank 0]: Rank 0 timed out in monitoredBarrier after ",
                               timeout.count(), " ms (rank ", r, " had not arrived yet)"));
    if (appears(*store_, arrivedKey(r), deadline)) continue;
    missing.push_back(r);
    if (!waitAllRanks) break;
  }
  if (!missing.empty())
    C10_THROW_ERROR(DistBackendError,
                    c10::str("coil backend: [Rank 0]: ", missing.size() > 1 ? "Ranks " : "Rank ",
                             rankList(missing), " failed to pass monitoredBarrier in ",
                             timeout.count(), " ms"));
  store_->set(releaseKey, std::vector<uint8_t>{1});
  for (int r = 1; r < size_; ++r) {
    try {
      store_->deleteKey(arrivedKey(r));
    } catch (const c10::Error&) {
      // A store without deleteKey keeps a few bytes per barrier; harmless.
    }
  }
}

}  // namespace coil_torch
