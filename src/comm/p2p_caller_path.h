// Point-to-point on the caller-driven paths (transports/caller_io.h: tcp's
// express sockets), one of the three ways a message of a batch moves
// (p2p_task.h).
//
// Why. Through the FIFOs, each 128 KiB slice over tcp is copied into a
// slot, written by the proxy thread, read by the peer's proxy into a slot
// and copied out, with two thread wake-ups per slot: a 2-rank exchange of
// 8 bytes took 62-68 us where Open MPI's tcp BTL took 14-15, and 0.54-0.74x
// its bandwidth from 512 KiB to 8 MiB. Here the calling thread writes each
// message from the user's buffer and reads it into the user's buffer, as
// the collectives' caller-path executor does.
//
// A message is cut into pieces of the path's agreed size, one message each,
// stamped with the message's fingerprint (whose count makes two ranks that
// disagree on the size fail at the first piece). Sends and receives of a
// batch advance together in the batch's loop, without blocking, so any set
// that matches up completes. A send is complete once its last piece is in
// the kernel's socket buffer (the caller may reuse its buffer); where no
// receive is posted yet, the socket buffers hold what fits, as the FIFOs
// did, and a larger send waits for the receive.
#pragma once

#include <vector>

#include "comm/p2p_task.h"

namespace coil {

/// Moves what can move of `t` (which has a callerIo) without blocking: begins
/// its next piece, advances the path, completes the piece. True if anything
/// moved. Throws a coil::Error on a failed path (coilRemoteError) or a
/// message that is not the one expected (coilInvalidUsage).
bool moveOnCallerPath(P2pTask& t);

/// Sleeps up to `ms` until one of the caller-driven paths of the tasks that
/// wait may move (bytes arrived, room to send), when every task that can
/// move at all moves on one; false at once, without sleeping, otherwise
/// (a FIFO or zero-copy task waits too: the caller backs off its own way).
bool awaitCallerPaths(const std::vector<P2pTask>& tasks, int ms);

}  // namespace coil
