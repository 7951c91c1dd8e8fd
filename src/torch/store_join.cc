#include "store_join.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "coil_calls.h"

namespace coil_torch {
namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<uint8_t>;

// What coil's message says when an id's root refused the connection although
// it listened before the id was made (src/bootstrap/bootstrap.cc).
constexpr const char* kRootGoneMark = "is left from an earlier run";
constexpr auto kPollInterval = std::chrono::milliseconds(50);

std::string fingerprint(const Bytes& id) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (uint8_t b : id) h = (h ^ b) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

coilResult_t initWith(const Bytes& bytes, int rank, int size, std::chrono::milliseconds timeout,
                      const std::string& groupName, coilComm_t* comm) {
  coilUniqueId id;
  std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.timeoutMs = timeout.count();
  config.commName = groupName.c_str();
  return coilCommInitRankConfig(comm, size, id, rank, &config);
}

Bytes readId(c10d::Store& store, const std::string& key) {
  Bytes bytes = store.get(key);  // blocks until rank 0 sets it, or the store's timeout
  TORCH_CHECK(bytes.size() == sizeof(coilUniqueId::internal), "coil backend: the unique id under "
              "store key '", key, "' has ", bytes.size(), " bytes, expected ",
              sizeof(coilUniqueId::internal));
  return bytes;
}

// Waits until `key` holds something other than `stale`: the id rank 0 of
// this attempt sets.
Bytes waitForAnotherId(c10d::Store& store, const std::string& key, const Bytes& stale,
                       Clock::time_point deadline, int rank, const std::string& why) {
  for (;;) {
    if (store.check({key})) {
      Bytes bytes = readId(store, key);
      if (bytes != stale) return bytes;
    }
    if (Clock::now() >= deadline)
      C10_THROW_ERROR(DistBackendError,
                      c10::str("coil backend: rank ", rank, ": the unique id under store key '",
                               key, "' names a rendezvous root that is gone, and rank 0 set no "
                               "other before the timeout: ", why));
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace

JoinedComm joinThroughStore(c10d::Store& store, int rank, int size,
                            std::chrono::milliseconds timeout, const std::string& key,
                            const std::string& groupName) {
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "coil backend: rank ", rank,
              " is out of range for a group of ", size, " ranks");
  JoinedComm joined;
  if (rank == 0) {
    coilUniqueId id;
    check(coilGetUniqueId(&id), "coilGetUniqueId");
    Bytes bytes(id.internal, id.internal + sizeof id.internal);
    store.set(key, bytes);
    check(initWith(bytes, rank, size, timeout, groupName, &joined.comm), "coilCommInitRankConfig");
    // Every rank has read the key by now (each joined through its root).
    try {
      store.deleteKey(key);
    } catch (const std::exception&) {
      // A store without deleteKey keeps it; a restart then meets it as above.
    }
    joined.storeKey = key + "/" + fingerprint(bytes);
    return joined;
  }
  const Clock::time_point deadline =
      Clock::now() + (timeout.count() > 0 ? timeout : std::chrono::milliseconds(30 * 60 * 1000));
  Bytes bytes = readId(store, key);
  for (bool warned = false;; warned = true) {
    coilResult_t rc = initWith(bytes, rank, size, timeout, groupName, &joined.comm);
    if (rc == coilSuccess) break;
    const std::string why = coilGetLastError(nullptr);
    if (rc != coilRemoteError || why.find(kRootGoneMark) == std::string::npos)
      check(rc, "coilCommInitRankConfig");
    if (!warned)
      TORCH_WARN("coil backend: rank ", rank, ": the unique id under store key '", key,
                 "' names a rendezvous root that is gone (left by an earlier attempt of a "
                 "restarted job?); waiting for rank 0 to set a new one");
    bytes = waitForAnotherId(store, key, bytes, deadline, rank, why);
  }
  joined.storeKey = key + "/" + fingerprint(bytes);
  return joined;
}

}  // namespace coil_torch
