#include "algorithms/fingerprint.h"

#include <sstream>

namespace coil::algo {

namespace {
uint64_t countHash(uint64_t count) {
  // 28 bits of a 64-bit mix; collisions only weaken detection, never correctness.
  uint64_t x = count + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x & 0xFFFFFFFull;
}
}  // namespace

const char* collName(CollKind kind) {
  switch (kind) {
    case CollKind::AllReduce: return "allreduce";
    case CollKind::Broadcast: return "broadcast";
    case CollKind::Reduce: return "reduce";
    case CollKind::AllGather: return "allgather";
    case CollKind::ReduceScatter: return "reducescatter";
    case CollKind::AllToAll: return "alltoall";
    case CollKind::Gather: return "gather";
    case CollKind::Scatter: return "scatter";
    case CollKind::SendRecv: return "send/recv";
    case CollKind::Barrier: return "barrier";
    case CollKind::FailureNotice: return "failure notice";
  }
  return "collective";
}

uint64_t Fingerprint::encode() const {
  return (static_cast<uint64_t>(seq & 0xFFFFFFu) << 40) |
         (static_cast<uint64_t>(static_cast<uint8_t>(coll) & 0xF) << 36) |
         (static_cast<uint64_t>(type & 0xF) << 32) | (static_cast<uint64_t>(op & 0xF) << 28) |
         countHash(count);
}

std::string explainMismatch(uint64_t got, uint64_t expected) {
  auto seq = [](uint64_t t) { return (t >> 40) & 0xFFFFFF; };
  auto coll = [](uint64_t t) { return collName(static_cast<CollKind>((t >> 36) & 0xF)); };
  std::ostringstream os;
  if (static_cast<CollKind>((got >> 36) & 0xF) == CollKind::FailureNotice) {
    os << "the peer's communicator failed";
  } else if (seq(got) != seq(expected)) {
    os << "the peer is in call #" << seq(got) << " (" << coll(got) << ") but this rank is in call #"
       << seq(expected) << " (" << coll(expected) << "): ranks issued collectives in a different order";
  } else if (((got >> 36) & 0xF) != ((expected >> 36) & 0xF)) {
    os << "the peer called " << coll(got) << " where this rank called " << coll(expected);
  } else if (((got >> 32) & 0xF) != ((expected >> 32) & 0xF)) {
    os << "the peer used datatype " << ((got >> 32) & 0xF) << ", this rank " << ((expected >> 32) & 0xF);
  } else if (((got >> 28) & 0xF) != ((expected >> 28) & 0xF)) {
    os << "the peer used reduction op " << ((got >> 28) & 0xF) << ", this rank "
       << ((expected >> 28) & 0xF);
  } else {
    os << "the peer passed a different count";
  }
  return os.str();
}

}  // namespace coil::algo
