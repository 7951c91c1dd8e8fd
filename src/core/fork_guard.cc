#include "core/fork_guard.h"

#include <pthread.h>

#include <new>
#include <vector>

namespace coil {
namespace {

struct Guarded {
  void (*lock)(void*);
  void (*unlock)(void*);
  void (*renew)(void*);
  void* mutex;
};

// The child gets a fresh lock rather than an unlocked copy: a copy still
// counts the parent's threads that were queued on it (a pthread rwlock
// keeps a count of waiting readers), and those threads do not exist here.
template <typename M>
Guarded guardedFor(M& m) {
  return {[](void* p) { static_cast<M*>(p)->lock(); },
          [](void* p) { static_cast<M*>(p)->unlock(); },
          [](void* p) { new (p) M(); }, &m};
}

// The list itself is protected by this lock, which is taken first before
// fork, so a registration racing a fork cannot tear it.
std::mutex gListMutex;

std::vector<Guarded>& list() {
  static std::vector<Guarded>* guarded = [] {
    pthread_atfork(
        [] {
          gListMutex.lock();
          for (const Guarded& g : *guarded) g.lock(g.mutex);
        },
        [] {
          for (auto it = guarded->rbegin(); it != guarded->rend(); ++it) it->unlock(it->mutex);
          gListMutex.unlock();
        },
        [] {
          for (auto it = guarded->rbegin(); it != guarded->rend(); ++it) it->renew(it->mutex);
          new (&gListMutex) std::mutex();
        });
    return new std::vector<Guarded>;
  }();
  return *guarded;
}

template <typename M>
void add(M& m) {
  std::vector<Guarded>& l = list();
  std::lock_guard lock(gListMutex);
  l.push_back(guardedFor(m));
}

}  // namespace

void guardAcrossFork(std::mutex& m) { add(m); }
void guardAcrossFork(std::shared_mutex& m) { add(m); }

}  // namespace coil
