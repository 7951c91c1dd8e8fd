#include "comm/mismatch_probe.h"

#include "algorithms/failure_notice.h"
#include "algorithms/fingerprint.h"
#include "core/error.h"

namespace coil {

void MismatchProbe::check() const {
  using algo::CollKind;
  const uint32_t seq = algo::seqOf(tag_);
  for (size_t q = 0; q < peers_.size(); ++q) {
    transport::Connection* conn = peers_[q];
    if (conn == nullptr) continue;
    transport::SlotFifo& fifo = conn->recvFifo();
    transport::RecvSlot slot;
    // A failure notice may queue behind slots this call will never read.
    for (uint32_t i = 0; fifo.tryPeekAt(i, &slot); ++i)
      if (algo::isFailureNotice(slot.tag)) algo::failForeignSlot(describe_(), static_cast<int>(q), slot, tag_);
    if (linksShared_ || !fifo.tryPeek(&slot) || ours(slot.tag)) continue;
    if (algo::kindOf(slot.tag) == CollKind::SendRecv) continue;
    if (algo::seqDistance(algo::seqOf(slot.tag), seq) > 0) continue;  // the peer is ahead
    fail(coilInvalidUsage, describe_(), ": mismatched collective with rank ", q, ": ",
         algo::explainMismatch(slot.tag, tag_), " (its data waits where this call never reads)");
  }
  if (window_ == nullptr) return;
  for (int q = 0; q < window_->nranks(); ++q) {
    if (q == rank_) continue;
    const uint64_t stamp = window_->latestStampTag(q);
    if (stamp == 0 || ours(stamp) || algo::seqOf(stamp) != seq) continue;
    fail(coilInvalidUsage, describe_(), ": mismatched collective with rank ", q, ": ",
         algo::explainMismatch(stamp, tag_), " (rank ", q, " waits in the shared window)");
  }
}

}  // namespace coil
