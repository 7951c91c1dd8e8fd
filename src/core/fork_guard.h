// fork() in a process with threads copies only the forking thread: a lock
// that another thread held at that instant stays locked forever in the
// child. coil has such threads (the rendezvous root that coilGetUniqueId
// starts, tcp proxies), and test harnesses, launchers and Python's
// multiprocessing fork after them. Each process-wide lock of coil's is
// registered here; a pthread_atfork handler takes them all before fork and
// releases them on both sides, so the child starts with them free.
#pragma once

#include <mutex>
#include <shared_mutex>

namespace coil {

/// Holds `m` across every later fork(). Register at first use, in a fixed
/// order; never log or take another registered lock while holding one.
void guardAcrossFork(std::mutex& m);
void guardAcrossFork(std::shared_mutex& m);

}  // namespace coil
