#include "transports/ib/registration_cache.h"

#include <cerrno>
#include <string>

#include "core/error.h"

namespace coil::transport::ib {

RegistrationCache::~RegistrationCache() {
  for (auto& [start, e] : byStart_) api_.deregMr(e.mr);
}

void RegistrationCache::add(void* buffer, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(buffer);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = byStart_.find(start);
  if (it != byStart_.end()) {
    if (it->second.end != start + bytes)  // ranges are keyed by their start
      fail(coilInvalidUsage, "coilCommRegister: a range at ", buffer, " is registered already with ",
           it->second.end - start, " bytes, not ", bytes, "; deregister it first");
    ++it->second.users;
    return;
  }
  ibv_mr* mr = api_.regMr(pd_, buffer, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr)
    failErrno("ib: registering " + std::to_string(bytes) +
                  " bytes (is the locked-memory limit, ulimit -l, too low?)",
              errno);
  byStart_.emplace(start, Entry{start + bytes, mr, 1});
}

bool RegistrationCache::remove(void* buffer, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(buffer);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = byStart_.find(start);
  if (it == byStart_.end() || it->second.end != start + bytes) return false;
  if (--it->second.users == 0) {
    api_.deregMr(it->second.mr);
    byStart_.erase(it);
  }
  return true;
}

ibv_mr* RegistrationCache::find(const void* buffer, size_t bytes) const {
  const auto start = reinterpret_cast<uintptr_t>(buffer);
  std::lock_guard<std::mutex> lock(mutex_);
  // Candidates start at or before `start`; the nearest ones are likeliest.
  for (auto it = byStart_.upper_bound(start); it != byStart_.begin();) {
    --it;
    if (it->second.end >= start + bytes) return it->second.mr;
  }
  return nullptr;
}

size_t RegistrationCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return byStart_.size();
}

}  // namespace coil::transport::ib
