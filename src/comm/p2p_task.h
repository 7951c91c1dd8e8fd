// One send or receive of a point-to-point batch (p2p.cc), and the state of
// the path it moves on. A message takes one of three:
//   - the FIFO slots (every transport): slice by slice, through the slots;
//   - zero-copy between registered buffers (transports/direct_io.h: ib),
//     announced in the FIFO first;
//   - the peer's caller-driven path (transports/caller_io.h: tcp's express
//     socket), in messages of up to a piece, straight from and into the
//     caller's buffers (p2p_caller_path.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "comm/communicator.h"
#include "reduce/reduce.h"
#include "transports/caller_io.h"
#include "transports/direct_io.h"
#include "transports/transport.h"

namespace coil {

struct P2pTask {
  P2pCall call;
  size_t bytes = 0;
  size_t done = 0;
  uint64_t tag = 0;
  transport::Connection* conn = nullptr;
  // The previous task of the batch on the same peer and direction; this one
  // may start only once that one has finished. -1: none.
  int after = -1;
  // Large messages over a transport with a zero-copy path (direct_io.h):
  // the sender first announces the message in the FIFO, one slot stamped
  // like data that holds its byte count and whether it goes straight
  // between the user buffers (the sender's buffer was registered) or
  // through the slots after all. A receiver that expects another size, or
  // no announcement, learns it from that slot as from any other.
  transport::DirectIo* direct = nullptr;
  bool useDirect = false;
  uint64_t ticket = 0;
  bool announced = false;
  bool posted = false;
  // The caller-driven path, when the message takes it (nullptr: it does
  // not); `piece`: the largest message on it; `inFlight`: the bytes of the
  // piece begun and not complete (meaningful while `begun`).
  transport::CallerIo* callerIo = nullptr;
  size_t piece = 0;
  size_t inFlight = 0;
  bool begun = false;
  // Whether anything moved yet: an empty message is done once its empty
  // slot (or its empty message) has.
  bool started = false;
  bool finished() const { return started && done >= bytes; }
};

/// "send to rank 3 (100 x float)": how errors name a task.
inline std::string describe(const P2pTask& t) {
  std::ostringstream os;
  os << (t.call.isSend ? "send to rank " : "recv from rank ") << t.call.peer << " ("
     << t.call.count << " x " << reduce::typeName(t.call.type) << ")";
  return os.str();
}

}  // namespace coil
