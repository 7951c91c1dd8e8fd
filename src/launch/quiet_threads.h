// Waiting, before a fork, until this process's other threads are asleep.
//
// A fork copies every lock as it stands, and no thread but the caller into
// the child. glibc's malloc takes its locks across fork (pthread_atfork),
// but a sanitizer's allocator does not: a thread in the middle of a malloc
// or a free at fork time leaves a region lock held in the child forever,
// and the child hangs at its next allocation of that size (seen in CI:
// a rank forked just after the rendezvous root's thread started never
// answered its neighbour; reproduced in about 1 fork in 600 beside a thread
// that allocates, and in none of 3000 after waiting as below).
//
// A thread asleep in the kernel (in poll, read, a futex wait) is almost
// never inside the allocator's critical sections, which are short and do
// not block; a thread that runs, or is runnable and preempted, may be. So
// ForkedRanks forks once no other thread is running, or when its patience
// ends. It narrows the window; a fork in a sanitizer build beside threads
// is still not safe by construction (fork before threads, forked_ranks.h).
#pragma once

#include <sys/types.h>

#include <chrono>

namespace coil {

/// Returns true once no other thread of this process is running or
/// runnable (state R in /proc/self/task/TID/stat), false when `deadline`
/// passed first (the caller forks anyway). True at once when the process
/// has no other thread, or when /proc cannot tell.
bool waitUntilOtherThreadsSleep(std::chrono::steady_clock::time_point deadline);

/// fork() once the other threads sleep, or after `patience`: for the tests
/// that fork by hand rather than through ForkedRanks.
pid_t forkWhenQuiet(std::chrono::milliseconds patience = std::chrono::seconds(1));

}  // namespace coil
