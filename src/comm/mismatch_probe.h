// MismatchProbe: what a stalled wait of one collective looks at to tell a
// slow peer from a peer in a different call.
//
// Every slot and window step carries the caller's fingerprint, and the
// rank that reads it checks it. That misses one kind of mismatch: ranks
// waiting on different paths, where neither ever reads what the other
// wrote. A small all-reduce through the shared window against an all-gather
// through the FIFOs is one: the first waits for its peer's window step,
// the second for a FIFO slot, until the timeout. So once a wait sleeps
// (transport::StallCheck; never while it spins), it asks the probe, which
// looks at what the peers left where this call is not looking:
//   - the head slot of each receive FIFO: a slot of an earlier or the same
//     call number with another fingerprint can never be read by this call;
//   - each peer's last window stamp: the same call number with another
//     fingerprint means the peer runs a different call through the window.
// Point-to-point slots are left alone: their numbers count per peer, and a
// peer may send one legitimately while this rank is still in a collective.
// So are the head slots of links another communicator shares (coilCommSplit
// with splitShare=1): a peer done with this call may already be in the
// other communicator's next one, and a slot does not say whose it is (the
// other's call numbers start at a random offset, so they look older or newer
// by chance). A mismatch there ends at the timeout instead.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "transports/slot_fifo.h"
#include "transports/transport.h"
#include "transports/window.h"

namespace coil {

class MismatchProbe final : public transport::StallCheck {
 public:
  /// `peers` by rank (nullptr for this rank), `linksShared` whether another
  /// communicator has used them too, `window` may be null, `tag` the call's
  /// fingerprint and `alsoTag` a second one it uses (the call agreement's,
  /// or 0), `describe` its text (called only on failure).
  MismatchProbe(const std::vector<transport::Connection*>& peers, bool linksShared,
                const transport::Window* window, int rank, uint64_t tag, uint64_t alsoTag,
                const std::function<std::string()>& describe)
      : peers_(peers), linksShared_(linksShared), window_(window), rank_(rank), tag_(tag),
        alsoTag_(alsoTag), describe_(describe) {}

  /// Throws coilInvalidUsage naming the peer and both calls on a mismatch.
  void check() const override;

 private:
  bool ours(uint64_t tag) const { return tag == tag_ || (alsoTag_ != 0 && tag == alsoTag_); }

  const std::vector<transport::Connection*>& peers_;
  bool linksShared_;
  const transport::Window* window_;
  int rank_;
  uint64_t tag_;
  uint64_t alsoTag_;
  const std::function<std::string()>& describe_;
};

}  // namespace coil
