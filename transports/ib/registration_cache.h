// RegistrationCache: the memory regions the application registered
// (coilCommRegister) with one device, sorted by address and refcounted, so
// that a direct message finds its region with a lookup instead of an
// ibv_reg_mr on the hot path. Entries live until their last deregistration
// (or the device's end); a range is never registered twice.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "transports/ib/verbs_api.h"

namespace coil::transport::ib {

class RegistrationCache {
 public:
  RegistrationCache(const VerbsApi& api, ibv_pd* pd) : api_(api), pd_(pd) {}
  /// Deregisters whatever is left.
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  /// Registers the range (or counts one more user of it). Throws
  /// coilSystemError naming the size when the device refuses.
  void add(void* buffer, size_t bytes);
  /// One user fewer of the range add() registered; the last one
  /// deregisters it. False when no such range is registered.
  bool remove(void* buffer, size_t bytes);
  /// The region that holds [buffer, buffer + bytes), or nullptr.
  ibv_mr* find(const void* buffer, size_t bytes) const;
  /// Registered ranges (for tests and logs).
  size_t size() const;

 private:
  struct Entry {
    uintptr_t end;
    ibv_mr* mr;
    int users;
  };
  const VerbsApi& api_;
  ibv_pd* pd_;
  mutable std::mutex mutex_;
  std::map<uintptr_t, Entry> byStart_;  // keyed by the range's start
};

}  // namespace coil::transport::ib
