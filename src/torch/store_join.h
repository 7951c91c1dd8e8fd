// Joining a coil communicator through the c10d store torch passes in: rank 0
// makes a unique id and sets it under a key, the others get it there.
//
// torchrun's agent keeps one store for a whole job, restarts included
// (--max-restarts), and torch puts no attempt number in the keys. So a
// restarted rank can find the id of a failed attempt, whose root died with
// it. coil refuses such an id at once (its root listened before the id
// existed, so a refused connection means it is gone); the rank then waits
// for rank 0 of its own attempt to set a different id. Rank 0 deletes the
// key once everyone has joined, so a job that fails after init leaves no id
// behind.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

#include "coil.h"

namespace coil_torch {

struct JoinedComm {
  coilComm_t comm = nullptr;
  /// `key` plus a fingerprint of the id: the prefix of every other key this
  /// communicator uses (point-to-point, monitored barriers), so that none
  /// of them meets a count or mark a failed attempt left in the store.
  std::string storeKey;
};

/// Joins rank `rank` of `size`; every wait gives up after `timeout` (0: coil's
/// default). Throws c10::DistBackendError with coil's message on failure.
JoinedComm joinThroughStore(c10d::Store& store, int rank, int size,
                            std::chrono::milliseconds timeout, const std::string& key,
                            const std::string& groupName);

}  // namespace coil_torch
