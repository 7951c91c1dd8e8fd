// Failure notices: how the error that broke one rank's communicator reaches
// the ranks that did not see it themselves.
//
// When a collective fails on one rank (a mismatch it detected, a timeout),
// that rank closes its connections, and its peers' waits end with "rank 3
// closed its connection". That names a rank, not the reason, and a peer
// that waits on someone else never looks at rank 3's connection at all
// (tcp tells a close after an error from a normal teardown only by timing).
// So before closing, the failing rank puts one more slot into every FIFO it
// sends on, where there is room: a failure notice, tagged FailureNotice,
// whose payload is its error message. A peer that reads the notice where it
// expected data, or finds it queued while its wait stalls
// (comm/mismatch_probe.h), fails with coilRemoteError and that message.
#pragma once

#include <cstdint>
#include <string>

#include "transports/slot_fifo.h"

namespace coil::algo {

/// The tag of every failure notice.
uint64_t failureNoticeTag();
inline bool isFailureNotice(uint64_t tag) { return tag == failureNoticeTag(); }

/// Publishes a notice carrying `message` into `fifo` if a slot is free (the
/// owner thread only: it is the FIFO's producer). False if the FIFO is full.
bool postFailureNotice(transport::SlotFifo& fifo, const std::string& message);

/// Fails the call `call` that found `slot` from rank `peer` where a slot
/// tagged `expected` belonged: coilRemoteError with the peer's message
/// (made printable and bounded) for a failure notice, coilInvalidUsage
/// naming both calls for anything else.
[[noreturn]] void failForeignSlot(const std::string& call, int peer,
                                  const transport::RecvSlot& slot, uint64_t expected);

}  // namespace coil::algo
