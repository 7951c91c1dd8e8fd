// The point-to-point connectors of every coil group in a job, counted under
// one key of the default group's store, so that the store's host can wait
// for all of them before it leaves.
//
// Each group's connectors already leave together (p2p_connector.h). But the
// store's host (rank 0 under mp.spawn or a launch by hand) may be in no
// part of a group's point-to-point: it never sent or received there, or it
// is not a member (a pipeline group without rank 0). It then exited while
// those ranks' connectors still waited on its store, and torch logged each
// lost wait with a stack trace. So every connector also counts itself in
// here, and out as its last store call; rank 0 of the default group, at
// that group's shutdown, waits (a short grace) until only its own
// connectors are still in.
//
// The key carries the default group's store key, which holds a fingerprint
// of its unique id: a restarted job never meets an old attempt's count.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace coil_torch {

class JobConnectors {
 public:
  JobConnectors(c10::intrusive_ptr<c10d::Store> store, std::string key)
      : store_(std::move(store)), key_(std::move(key)) {}

  /// Makes the registry of the default group that joined with `storeKey`
  /// in `store`, and makes it current() for the groups that follow.
  static std::shared_ptr<JobConnectors> start(const c10::intrusive_ptr<c10d::Store>& store,
                                              const std::string& storeKey);
  /// The registry of this process's default coil group; null when the
  /// default group is not a coil one, or is shut down.
  static std::shared_ptr<JobConnectors> current();
  /// At the default group's shutdown: current() no longer returns `job`, so
  /// the store it holds is not kept past the group.
  static void finish(const std::shared_ptr<JobConnectors>& job);

  /// Whether it was counted (false: the store did not answer).
  bool countIn();
  /// For a connector that countIn() counted; its last store call.
  void countOut();
  /// Rank 0's wait: until every other process's connectors are out, at most
  /// `grace`. No store wait (which torch logs when it times out): a poll,
  /// safe here because this process hosts the store or the agent outlives it.
  void waitForOthers(std::chrono::milliseconds grace);

 private:
  const c10::intrusive_ptr<c10d::Store> store_;
  const std::string key_;
  std::atomic<int64_t> local_{0};  // this process's connectors counted in
};

}  // namespace coil_torch
