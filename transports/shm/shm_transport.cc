// Shared-memory transport: ranks on the same host exchange data through
// FIFOs in POSIX shared memory.
//
// Each rank creates one segment holding its INCOMING FIFOs, one per local
// peer, so the receiver owns the memory it reads and the sender writes the
// slots directly (one copy per hop). Layout:
//
//   [ directory: magic, fifo count, peer rank of each fifo ]  (one page)
//   [ FifoControl (page aligned) | slots ... ]  × local peers
//
// Setup (collective, via the bootstrap): create + init own segment, allGather
// the names, attach every peer's segment, barrier, unlink own name and the
// peers' (one killed right after the barrier cannot unlink its own). After
// the barrier nothing is left in /dev/shm whatever happens next. Works the same
// for ranks that are threads of one process (coilCommInitAll) and for
// separate processes.
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "transports/shm/shm_segment.h"
#include "transports/transport.h"

namespace coil::transport {
namespace {

constexpr uint32_t kMagic = 0xC011540Fu;
constexpr size_t kPage = 4096;
constexpr size_t kMaxPeers = (kPage - 16) / sizeof(int32_t);
constexpr size_t kNameBytes = 64;

struct Directory {
  uint32_t magic;
  uint32_t fifoCount;
  uint32_t slotCount;
  uint32_t slotBytes;
  int32_t peerRank[kMaxPeers];
};
static_assert(sizeof(Directory) <= kPage);

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

struct Layout {
  uint32_t slotCount;
  uint32_t slotBytes;
  size_t fifoStride() const {
    return roundUp(sizeof(FifoControl), kPage) + fifoDataBytes(slotCount, slotBytes);
  }
  size_t segmentBytes(size_t fifos) const { return kPage + fifos * fifoStride(); }
  FifoControl* control(void* base, size_t i) const {
    return reinterpret_cast<FifoControl*>(static_cast<uint8_t*>(base) + kPage + i * fifoStride());
  }
  uint8_t* data(void* base, size_t i) const {
    return reinterpret_cast<uint8_t*>(control(base, i)) + roundUp(sizeof(FifoControl), kPage);
  }
};

// Measured on the 2-core reference machine, 2026-11-21 (docs/performance.md):
// a FIFO step costs up to a futex wake-up (~20 µs) when the peer is late,
// since FIFO waits sleep after a short spin; in the caches a 2-rank ring
// moves data at 7.3e-5 µs/B (79 µs at 1 MiB, 541 µs at 4 MiB), beyond them
// 3.6× dearer (1658 µs at 8 MiB). With these it runs 2-rank shm all-reduces
// of ~768 KiB - 4 MiB, where its 256 KiB slots pipeline best.
const Traits& shmTraits() {
  static constexpr LinkCost kFifo{20.0, 1.0 / 20500.0, 1.0 / 20500.0, 3.6};
  static const Traits traits{"shm", /*peerMemoryMapped=*/true, kFifo, kFifo};
  return traits;
}

class ShmConnection final : public Connection {
 public:
  ShmConnection(int peer, SlotFifo send, SlotFifo recv) : peer_(peer), send_(send), recv_(recv) {}
  SlotFifo& sendFifo() override { return send_; }
  SlotFifo& recvFifo() override { return recv_; }
  const Traits& traits() const override { return shmTraits(); }
  int peer() const override { return peer_; }
  void close() noexcept override {
    // Both flags live in shared memory: the peer's waits see them at once.
    send_.closeProducer();
    recv_.closeConsumer();
  }

 private:
  int peer_;
  SlotFifo send_;
  SlotFifo recv_;
};

std::string fifoSegmentName(const std::string& commLabel, int rank) {
  return "/coil-" + commLabel + "-r" + std::to_string(rank);
}

class ShmTransport final : public Transport {
 public:
  const Traits& traits() const override { return shmTraits(); }

  bool canReach(const Endpoint& self, const Endpoint& peer) const override {
    return self.info.hostHash == peer.info.hostHash;
  }

  std::vector<std::unique_ptr<Connection>> connect(SetupContext& ctx,
                                                   const std::vector<int>& peerRanks) override {
    if (peerRanks.size() > kMaxPeers)
      fail(coilInvalidUsage, "shm transport supports at most ", kMaxPeers, " local peers");
    Layout layout{static_cast<uint32_t>(env::getInt("COIL_SHM_SLOTS", 2, kMaxSlots).value_or(8)),
                  static_cast<uint32_t>(
                      env::getInt("COIL_SHM_SLOT_BYTES", 4096, 64 << 20).value_or(256 << 10))};
    layout.slotBytes = static_cast<uint32_t>(roundUp(layout.slotBytes, 64));
    if ((layout.slotCount & (layout.slotCount - 1)) != 0)
      fail(coilInvalidUsage, "COIL_SHM_SLOTS=", layout.slotCount, " must be a power of two");

    // 1. Own segment with one incoming FIFO per local peer.
    std::string myName;
    if (!peerRanks.empty()) {
      myName = fifoSegmentName(ctx.commLabel, ctx.rank);
      own_ = ShmSegment::create(myName, layout.segmentBytes(peerRanks.size()));
      auto* dir = static_cast<Directory*>(own_.base());
      dir->magic = kMagic;
      dir->fifoCount = static_cast<uint32_t>(peerRanks.size());
      dir->slotCount = layout.slotCount;
      dir->slotBytes = layout.slotBytes;
      for (size_t i = 0; i < peerRanks.size(); ++i) {
        dir->peerRank[i] = peerRanks[i];
        FifoControl* c = layout.control(own_.base(), i);
        c->init(layout.slotCount, layout.slotBytes);
        c->consumerPid = getpid();
      }
    }

    std::vector<std::string> peerNames;
    for (int p : peerRanks) peerNames.push_back(fifoSegmentName(ctx.commLabel, p));
    UnlinkNamesOnFailure cleanup(std::move(peerNames));
    auto out = attachPeers(ctx, peerRanks, layout, myName);
    // Past the barrier every rank has attached; a peer killed between the
    // barrier and its own unlink would leave its name: remove every peer's.
    cleanup.unlinkAll();
    for (auto& c : out) connections_.push_back(c.get());
    return out;
  }

  void shutdown() noexcept override {
    for (Connection* c : connections_) c->close();
    connections_.clear();
  }

  ~ShmTransport() override { own_.unlink(); }

 private:
  // Steps 2 to 4: exchange the names, attach the peers' segments, unlink.
  std::vector<std::unique_ptr<Connection>> attachPeers(SetupContext& ctx,
                                                       const std::vector<int>& peerRanks,
                                                       const Layout& layout,
                                                       const std::string& myName) {
    // 2. Everyone learns everyone's segment name and size.
    struct NameRecord {
      char name[kNameBytes];
      uint64_t bytes;
    };
    std::vector<NameRecord> names(static_cast<size_t>(ctx.nranks));
    std::memset(names.data(), 0, names.size() * sizeof(NameRecord));
    std::snprintf(names[ctx.rank].name, kNameBytes, "%s", myName.c_str());
    names[ctx.rank].bytes = own_.size();
    ctx.oob.allGather(names.data(), sizeof(NameRecord));

    // 3. Attach each peer's segment and find the FIFO it keeps for us.
    std::vector<std::unique_ptr<Connection>> out;
    for (size_t i = 0; i < peerRanks.size(); ++i) {
      int p = peerRanks[i];
      const NameRecord& rec = names[p];
      if (rec.name[0] == '\0')
        fail(coilInternalError, "shm: rank ", p, " has no segment but rank ", ctx.rank,
             " expected to reach it over shm");
      // A peer's bytes: never read past the field, NUL or not.
      peerSegments_.push_back(ShmSegment::attach(std::string(rec.name, strnlen(rec.name, kNameBytes)), rec.bytes));
      void* base = peerSegments_.back().base();
      auto* dir = static_cast<const Directory*>(base);
      Layout theirs{dir->slotCount, dir->slotBytes};
      if (dir->magic != kMagic || theirs.segmentBytes(dir->fifoCount) != rec.bytes)
        fail(coilInternalError, "shm: segment of rank ", p, " is malformed");
      size_t slot = dir->fifoCount;
      for (size_t k = 0; k < dir->fifoCount; ++k)
        if (dir->peerRank[k] == ctx.rank) slot = k;
      if (slot == dir->fifoCount)
        fail(coilInternalError, "shm: rank ", p, " keeps no FIFO for rank ", ctx.rank);
      FifoControl* sendCtl = theirs.control(base, slot);
      sendCtl->producerPid = getpid();
      SlotFifo send(sendCtl, theirs.data(base, slot));
      SlotFifo recv(layout.control(own_.base(), i), layout.data(own_.base(), i));
      out.push_back(std::make_unique<ShmConnection>(p, send, recv));
      COIL_INFO(kShm, "rank ", ctx.rank, " <-> rank ", p, " via shm (", theirs.slotCount, " x ",
                theirs.slotBytes / 1024, " KiB slots)");
    }

    // 4. Once everyone has attached, the names can go.
    ctx.oob.barrier();
    own_.unlink();
    return out;
  }

  ShmSegment own_;
  std::vector<ShmSegment> peerSegments_;
  std::vector<Connection*> connections_;  // owned by the communicator
};

[[maybe_unused]] const bool kRegistered = [] {
  registerTransport("shm", 0, [] { return std::make_unique<ShmTransport>(); });
  return true;
}();

}  // namespace
}  // namespace coil::transport
