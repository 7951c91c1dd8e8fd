#include "algorithms/failure_notice.h"

#include <algorithm>
#include <cstring>

#include "algorithms/fingerprint.h"
#include "core/error.h"
#include "core/printable.h"

namespace coil::algo {
namespace {
// A notice shows at most this much of the peer's message.
constexpr size_t kNoticeChars = 512;
}  // namespace

uint64_t failureNoticeTag() {
  return Fingerprint{0, CollKind::FailureNotice, coilInt8, coilSum, 0}.encode();
}

bool postFailureNotice(transport::SlotFifo& fifo, const std::string& message) {
  void* slot = fifo.tryAcquire();
  if (slot == nullptr) return false;
  const size_t bytes = std::min<size_t>({message.size(), fifo.slotBytes(), kNoticeChars * 4});
  std::memcpy(slot, message.data(), bytes);
  fifo.publish(static_cast<uint32_t>(bytes), failureNoticeTag());
  return true;
}

void failForeignSlot(const std::string& call, int peer, const transport::RecvSlot& slot,
                     uint64_t expected) {
  if (isFailureNotice(slot.tag))
    fail(coilRemoteError, call, ": rank ", peer, " failed: ",
         printableText(slot.data, slot.bytes, kNoticeChars));
  fail(coilInvalidUsage, call, ": mismatched collective with rank ", peer, ": ",
       explainMismatch(slot.tag, expected));
}

}  // namespace coil::algo
