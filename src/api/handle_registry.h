// Which coilComm_t handles are live. A C program can pass any pointer as a
// communicator: one it destroyed or aborted, one it destroys twice, or one
// coil never made. Every entry point asks this registry before it touches
// the handle, so such a pointer becomes coilInvalidArgument instead of a
// use-after-free.
//
// A destroyed handle's memory is not returned at once: the empty shell is
// kept in a bounded quarantine, so the allocator cannot hand the same
// address to a new communicator while a stale copy of the old handle is
// still likely to be around (the shell keeps its error text too).
#pragma once

#include <functional>

#include "api/handle.h"

namespace coil::api {

/// Makes a new handle live.
void registerHandle(coilComm* comm);

/// Counts a call in flight on `comm` if it is live; throws
/// coilInvalidArgument ("communicator was destroyed" / "not a live
/// communicator") otherwise, and coilInvalidUsage for a handle this process
/// inherited through fork() (its threads and connections are the
/// parent's). Pair with leave().
void enter(coilComm* comm);
void leave(coilComm* comm) noexcept;

/// Ends `comm`'s life: no new call can enter it. Throws like enter() when
/// it is not live (a double destroy). True: the caller then waits for the
/// calls inside and buries it. False for a handle inherited through
/// fork(): it is forgotten here and nothing more may be done with it (its
/// teardown would join threads and close connections that are the
/// parent's); its memory stays, a copy the child cannot free.
bool retire(coilComm* comm);

/// Frees the communicator behind a retired handle whose calls have all
/// left, and keeps the shell in quarantine.
void bury(coilComm* comm) noexcept;

/// Calls `visit` on every live handle, under the registry's shared lock: no
/// handle retires (so none is freed) while it runs.
void forEachLive(const std::function<void(coilComm*)>& visit);

/// True while `comm`'s memory is coil's: live, or retired and quarantined.
/// Only then may an error message be stored on it.
bool owned(const coilComm* comm) noexcept;

}  // namespace coil::api
