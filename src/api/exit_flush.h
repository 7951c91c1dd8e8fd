// At exit, what a live communicator still holds for its peers leaves the
// process first.
//
// coilSend, and the root's side of a rooted call, return once coil holds
// the data (the caller may reuse its buffer); over tcp a proxy thread then
// writes it to the socket, and over ib posts it to the NIC. A rank that
// returned from main, or called exit(), right after, without
// coilCommDestroy, took that data with it in 25-100% of runs, and its peer
// failed with "rank 0 closed its connection or died"; with Gloo, or a plain
// socket, the kernel still delivers it. So the first communicator registers
// an atexit handler that waits, at most kExitWait for the whole process,
// until no live communicator made by this process (one inherited through
// fork() has none of its threads) has a send queued. _exit(), a fatal
// signal or Python's os._exit() skip it: destroy the communicator first.
#pragma once

#include <chrono>

namespace coil::api {

/// The longest the process waits at exit, over all its communicators: a
/// peer that stopped reading must not hold the exit up for long.
constexpr std::chrono::milliseconds kExitWait{2000};

/// Registers the handler, once per process. Called when a communicator's
/// init has succeeded: every object the handler uses exists by then, so
/// none is destroyed before it runs.
void armExitFlush();

}  // namespace coil::api
