#include "api/handle_registry.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <shared_mutex>
#include <unordered_map>

#include "api/shared_teardown.h"
#include "core/error.h"
#include "core/fork_guard.h"

namespace coil::api {
namespace {

// Inherited: live in the process that forked this one, which took the
// handle's memory along but none of its threads or connections. Forgotten:
// such a handle the child destroyed (nothing of it could be freed there).
enum class Life { Live, Retired, Buried, Inherited, Forgotten };

// Destroyed shells kept before their memory goes back to the allocator:
// about 100 KiB at most, and a stale handle among the last this many
// destroyed communicators can never name a new one.
constexpr size_t kQuarantine = 1024;

struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<const coilComm*, Life> handles;
  std::deque<coilComm*> buried;  // oldest first
};

Registry* gRegistry = nullptr;
void markInheritedInChild() noexcept;

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: handles may outlive static destruction
    guardAcrossFork(reg->mutex);
    gRegistry = reg;
    pthread_atfork(nullptr, nullptr, markInheritedInChild);
    return reg;
  }();
  return *r;
}

// Bumped by every retire(). A thread remembers the handle it last found
// live and the count at that time: while the count is unchanged, no handle
// has been retired since, so that one is still live and enter() need not
// ask the registry (its lock and lookup were a tenth of an 8-byte
// all-reduce's 0.2 µs).
std::atomic<uint64_t> gRetirements{0};
struct LastLive {
  const coilComm* comm = nullptr;
  uint64_t retirements = 0;
};
thread_local LastLive tLastLive;

// In a forked child, single-threaded, the fork guard having held the
// registry's lock across the fork: every live handle is its parent's now.
// Values change in place (no allocation); the bump makes every cached
// "still live" in enter() ask again.
void markInheritedInChild() noexcept {
  for (auto& [comm, life] : gRegistry->handles)
    if (life == Life::Live) life = Life::Inherited;
  gRetirements.fetch_add(1);
}

// `life`: the handle's entry, or null when the registry does not know it.
[[noreturn]] void rejectStale(const coilComm* comm, const Life* life) {
  if (life != nullptr && *life == Life::Inherited)
    fail(coilInvalidUsage, "communicator ", static_cast<const void*>(comm),
         " was made by process ", comm->ownerPid, ", and this process (pid ", ::getpid(),
         ") is a fork() child of it: the child inherited the handle but none of coil's threads "
         "or connections, so it cannot take part (over shared memory it would take its "
         "parent's place in the queues); make a new communicator in the child, or use "
         "this one in the parent only");
  if (life != nullptr)
    fail(coilInvalidArgument, "communicator ", static_cast<const void*>(comm),
         " was destroyed (coilCommDestroy or coilCommAbort); this handle is stale");
  fail(coilInvalidArgument, "comm ", static_cast<const void*>(comm),
       " is not a live communicator (never created by coil, or destroyed long ago)");
}

}  // namespace

void registerHandle(coilComm* comm) {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  r.handles[comm] = Life::Live;
}

void enter(coilComm* comm) {
  if (comm == nullptr) fail(coilInvalidArgument, "comm is NULL");
  const LastLive last = tLastLive;
  if (comm == last.comm && gRetirements.load() == last.retirements) {
    // Counted, then the count of retirements read again (both sequentially
    // consistent, as retire()'s bump and the destroyer's wait for
    // inflight == 0): either this call's count is seen by that wait, or
    // the bump is seen here and the call asks the registry.
    comm->inflight.fetch_add(1);
    if (gRetirements.load() == last.retirements) return;
    comm->inflight.fetch_sub(1);
  }
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  auto it = r.handles.find(comm);
  if (it == r.handles.end() || it->second != Life::Live)
    rejectStale(comm, it == r.handles.end() ? nullptr : &it->second);
  // Counted under the lock: once retire() has run, no call gets in.
  comm->inflight.fetch_add(1);
  // retire() takes the lock exclusively: no retirement is under way.
  tLastLive = {comm, gRetirements.load()};
}

void leave(coilComm* comm) noexcept { comm->inflight.fetch_sub(1); }

bool retire(coilComm* comm) {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  auto it = r.handles.find(comm);
  if (it != r.handles.end() && it->second == Life::Inherited) {
    it->second = Life::Forgotten;
    gRetirements.fetch_add(1);
    return false;
  }
  if (it == r.handles.end() || it->second != Life::Live)
    rejectStale(comm, it == r.handles.end() ? nullptr : &it->second);
  it->second = Life::Retired;
  gRetirements.fetch_add(1);
  return true;
}

void bury(coilComm* comm) noexcept {
  comm->staged.reset();  // runs the device calls still queued, which use impl
  // Then the windows they read, coil's and the application's, in the
  // order legacy IPC needs (shared_teardown.h).
  releaseSharedDeviceMemory(comm);
  comm->impl.reset();  // outside the lock: teardown joins threads and unmaps segments
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  r.handles[comm] = Life::Buried;
  r.buried.push_back(comm);
  if (r.buried.size() > kQuarantine) {
    coilComm* oldest = r.buried.front();
    r.buried.pop_front();
    r.handles.erase(oldest);
    delete oldest;
  }
}

void forEachLive(const std::function<void(coilComm*)>& visit) {
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  for (const auto& [comm, life] : r.handles)
    if (life == Life::Live) visit(const_cast<coilComm*>(comm));
}

bool owned(const coilComm* comm) noexcept {
  if (comm == nullptr) return false;
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  return r.handles.count(comm) != 0;
}

}  // namespace coil::api
