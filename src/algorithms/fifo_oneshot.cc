// The FIFO one-shot program (fifo_oneshot_program.h) on real data: two
// executors give its vocabulary a meaning, one over each peer's
// caller-driven path (transport::CallerIo), one over the transport FIFOs,
// and a third joins them where a communicator's links are of both kinds.
// All their waiting is in waitAll(); the reduction is shared.
#include "algorithms/fifo_oneshot.h"

#include <cstring>

#include "algorithms/caller_io_wait.h"
#include "algorithms/failure_notice.h"
#include "algorithms/fifo_oneshot_program.h"
#include "core/error.h"
#include "reduce/reduce.h"
#include "transports/caller_io.h"

namespace coil::algo {
namespace {

using transport::WaitFailure;

[[noreturn]] void failWait(const Call& call, transport::Connection& c, WaitFailure why,
                           const char* direction) {
  switch (why) {
    case WaitFailure::Timeout:
      fail(coilTimeout, call.description(), ": timed out after ", call.watch.deadline.totalMs(),
           " ms waiting ", direction, " rank ", c.peer(), " (", c.traits().name,
           "); the peer may be stuck, slower, or in a different call");
    case WaitFailure::PeerClosed:
      fail(coilRemoteError, call.description(), ": rank ", c.peer(), " closed its connection (",
           c.traits().name, ") — it failed, aborted or exited");
    case WaitFailure::PeerDied:
      fail(coilRemoteError, call.description(), ": rank ", c.peer(), " died (its process is gone)");
    case WaitFailure::Aborted:
      fail(coilRemoteError, call.description(), ": communicator aborted");
  }
  fail(coilInternalError, "unknown wait failure");
}

// What one rank's one-shot keeps between its steps. Thread-local and reused
// call after call, so that a warm call allocates nothing.
struct OneShotState {
  static constexpr uint8_t kSending = 1, kReceiving = 2;
  std::vector<uint8_t> role;        // per rank: kSending | kReceiving, as started
  std::vector<int> started;         // the peers with a transfer started, in program order
  std::vector<const void*> blocks;  // block q: rank q's input, once arrived
  std::vector<uint8_t> arrived;     // caller-driven receives land here, block q at q·S
  std::vector<uint8_t> saved;       // our input, when reducing in place overwrites it
  std::vector<transport::CallerIo*> io;     // per rank: its caller-driven path, if every peer has one
  std::vector<transport::CallerIo*> group;  // the started peers' paths, for awaitAny

  void reset(int n) {
    role.assign(static_cast<size_t>(n), 0);
    blocks.assign(static_cast<size_t>(n), nullptr);
    started.clear();
    group.clear();
  }
  // Records that a transfer with q started; true for q's first.
  bool start(int q, uint8_t what) {
    const bool first = role[q] == 0;
    role[q] |= what;
    if (first) started.push_back(q);
    return first;
  }
};

OneShotState& oneShotState() {
  thread_local OneShotState state;
  return state;
}

// reduceBlocks() of both executors: output ← fin(x0 ⊕ … ⊕ x(n-1)) with
// xq = blocks[q] and this rank's term from call.input. In place, our input
// is overwritten by the first kernel call: keep a copy when a later call
// still needs it (rank >= 2).
void reduceArrivedBlocks(const Call& call, int rank, OneShotState& st) {
  std::vector<const void*>& x = st.blocks;
  const int n = static_cast<int>(x.size());
  x[rank] = call.input;
  if (call.input == call.output && rank >= 2) {
    st.saved.assign(static_cast<const uint8_t*>(call.input),
                    static_cast<const uint8_t*>(call.input) + call.bytes);
    x[rank] = st.saved.data();
  }
  reduce::reduceInRankOrder(call.type, call.reduceOp, call.output, x.data(), n, call.count);
}

// Over every peer's CallerIo, driven by this thread alone; waitAll waits as
// caller_io_wait.h says.
class CallerIoExecutor {
 public:
  CallerIoExecutor(const std::vector<transport::Connection*>& peers, int rank, const Call& call,
                   int spinUs, bool yield, const std::vector<transport::CallerIo*>& io,
                   OneShotState& st)
      : peers_(peers), rank_(rank), call_(call), wait_(call, spinUs, yield), io_(io), st_(st),
        bytes_(call.bytes) {
    st_.arrived.resize(bytes_ * peers.size());
  }

  void recvBlock(int q) {
    io_[q]->beginRecv(st_.arrived.data() + static_cast<size_t>(q) * bytes_, bytes_, call_.tag);
    if (st_.start(q, OneShotState::kReceiving)) st_.group.push_back(io_[q]);
  }
  void send(int q) {
    io_[q]->beginSend(call_.input, bytes_, call_.tag);
    if (st_.start(q, OneShotState::kSending)) st_.group.push_back(io_[q]);
  }

  void waitAll() {
    if (st_.group.empty()) return;  // every peer is on a FIFO (MixedExecutor)
    wait_.until(
        st_.group,
        [&] {
          for (int q : st_.started)
            if (!complete(q)) return false;
          return true;
        },
        [&] {
          std::vector<int> missing;
          for (int q = 0; q < static_cast<int>(io_.size()); ++q)
            if (st_.role[q] != 0 && !complete(q)) missing.push_back(q);
          return missing;
        },
        transportName());
    for (int q = 0; q < static_cast<int>(io_.size()); ++q) {
      if (io_[q] == nullptr || !(st_.role[q] & OneShotState::kReceiving)) continue;
      size_t got = 0;
      uint64_t tag = 0;
      io_[q]->recvComplete(&got, &tag);
      checkArrival(call_, q, tag, got, call_.bytes);
      st_.blocks[q] = st_.arrived.data() + static_cast<size_t>(q) * bytes_;
    }
  }

  void reduceBlocks() { reduceArrivedBlocks(call_, rank_, st_); }
  void done() {}
  const Call& call() const { return call_; }
  int rank() const { return rank_; }

 private:
  // Every transfer started with rank q over its caller-driven path is over.
  bool complete(int q) const {
    size_t got;
    uint64_t tag;
    if (io_[q] == nullptr) return true;  // a FIFO peer (MixedExecutor)
    return (!(st_.role[q] & OneShotState::kSending) || io_[q]->sendComplete()) &&
           (!(st_.role[q] & OneShotState::kReceiving) || io_[q]->recvComplete(&got, &tag));
  }

  const char* transportName() const {
    for (int q : st_.started)
      if (io_[q] != nullptr) return peers_[q]->traits().name;
    return "";
  }

  const std::vector<transport::Connection*>& peers_;
  const int rank_;
  const Call& call_;
  CallerIoWait wait_;
  const std::vector<transport::CallerIo*>& io_;
  OneShotState& st_;
  const size_t bytes_;
};

// Over the transport FIFOs: one slot per peer each way. A peer's input is
// read in its slot, which done() frees after the reduction.
class FifoSlotExecutor {
 public:
  /// The peers q with io[q] == nullptr; the others are a MixedExecutor's
  /// CallerIoExecutor's.
  FifoSlotExecutor(const std::vector<transport::Connection*>& peers, int rank, const Call& call,
                   const transport::WaitWatch& watch, const std::vector<transport::CallerIo*>& io,
                   OneShotState& st)
      : peers_(peers), rank_(rank), call_(call), watch_(watch), io_(io), st_(st),
        bytes_(call.bytes) {}

  void send(int q) {
    transport::Connection& c = *peers_[q];
    WaitFailure why{};
    void* slot = c.sendFifo().acquire(watch_, &why);
    if (slot == nullptr) failWait(call_, c, why, "for buffer space at");
    if (bytes_ > c.sendFifo().slotBytes())
      fail(coilInternalError, "one-shot all-reduce of ", bytes_, " bytes exceeds the ",
           c.sendFifo().slotBytes(), "-byte slot to rank ", c.peer());
    std::memcpy(slot, call_.input, bytes_);
    c.sendFifo().publish(static_cast<uint32_t>(bytes_), call_.tag);
    c.kick();
    st_.start(q, OneShotState::kSending);
  }
  // The slot is looked at in waitAll; until then q is only awaited.
  void recvBlock(int q) { st_.start(q, OneShotState::kReceiving); }

  // Peers in rank order, each until its slot holds this call's input.
  void waitAll() {
    const int n = static_cast<int>(peers_.size());
    auto awaited = [&](int q) {
      return io_[q] == nullptr && (st_.role[q] & OneShotState::kReceiving) != 0;
    };
    for (int q = 0; q < n; ++q) {
      if (!awaited(q)) continue;
      transport::Connection& c = *peers_[q];
      transport::RecvSlot slot;
      WaitFailure why{};
      if (!c.recvFifo().peek(&slot, watch_, &why)) {
        if (why == WaitFailure::Timeout) {  // q, and every later peer with nothing in its FIFO
          std::vector<int> missing{q};
          transport::RecvSlot later;
          for (int p = q + 1; p < n; ++p)
            if (awaited(p) && !peers_[p]->recvFifo().tryPeek(&later)) missing.push_back(p);
          failDataTimeout(call_, missing, c.traits().name);
        }
        failWait(call_, c, why, "for data from");
      }
      if (slot.tag != call_.tag) failForeignSlot(call_.description(), q, slot, call_.tag);
      checkArrival(call_, q, slot.tag, slot.bytes, call_.bytes);
      st_.blocks[q] = slot.data;
    }
  }

  void reduceBlocks() { reduceArrivedBlocks(call_, rank_, st_); }

  void done() {
    for (int q = 0; q < static_cast<int>(peers_.size()); ++q) {
      if (io_[q] != nullptr || !(st_.role[q] & OneShotState::kReceiving)) continue;
      peers_[q]->recvFifo().release();
      peers_[q]->kick();
    }
  }

 private:
  const std::vector<transport::Connection*>& peers_;
  const int rank_;
  const Call& call_;
  const transport::WaitWatch& watch_;
  const std::vector<transport::CallerIo*>& io_;
  OneShotState& st_;
  const size_t bytes_;
};

// Links of both kinds (shm inside hosts, tcp across): the peers with a
// caller-driven path are the CallerIoExecutor's, the others the
// FifoSlotExecutor's. It waits for the FIFOs first, and each time such a
// wait wakes from a sleep slice it advances the caller-driven transfers
// (AdvancePaths), so a message that did not fit the socket at once still
// leaves while this rank waits for a slot.
class MixedExecutor {
 public:
  MixedExecutor(const std::vector<transport::Connection*>& peers, int rank, const Call& call,
                int spinUs, bool yield, const std::vector<transport::CallerIo*>& io,
                OneShotState& st)
      : advance_(call, st.group),
        watch_(withStall(call.watch, &advance_)),
        io_(io),
        caller_(peers, rank, call, spinUs, yield, io, st),
        fifo_(peers, rank, call, watch_, io, st),
        st_(st) {}

  void send(int q) { io_[q] != nullptr ? caller_.send(q) : fifo_.send(q); }
  void recvBlock(int q) { io_[q] != nullptr ? caller_.recvBlock(q) : fifo_.recvBlock(q); }
  void waitAll() {
    fifo_.waitAll();
    caller_.waitAll();
  }
  void reduceBlocks() { reduceArrivedBlocks(call(), rank(), st_); }
  void done() { fifo_.done(); }

 private:
  class AdvancePaths final : public transport::StallCheck {
   public:
    AdvancePaths(const Call& call, const std::vector<transport::CallerIo*>& group)
        : call_(call), group_(group) {}
    void check() const override {
      if (call_.watch.stall != nullptr) call_.watch.stall->check();
      for (transport::CallerIo* io : group_) {
        io->advance();
        if (!io->failure().empty()) fail(coilRemoteError, call_.description(), ": ", io->failure());
      }
    }

   private:
    const Call& call_;
    const std::vector<transport::CallerIo*>& group_;
  };
  static transport::WaitWatch withStall(transport::WaitWatch w, const transport::StallCheck* s) {
    w.stall = s;
    return w;
  }
  const Call& call() const { return caller_.call(); }
  int rank() const { return caller_.rank(); }

  AdvancePaths advance_;
  transport::WaitWatch watch_;
  const std::vector<transport::CallerIo*>& io_;
  CallerIoExecutor caller_;
  FifoSlotExecutor fifo_;
  OneShotState& st_;
};

}  // namespace

void fifoOneShotAllReduce(const std::vector<transport::Connection*>& peers, int rank,
                          const Call& call, const OneShotPaths& paths, int spinUs, bool yield) {
  const int n = static_cast<int>(peers.size());
  const FifoOneShotShape shape{rank, n, call.count};
  OneShotState& st = oneShotState();
  st.reset(n);

  // Every rank reaches every peer over a caller-driven path: use those.
  std::vector<transport::CallerIo*>& io = st.io;
  io.assign(static_cast<size_t>(n), nullptr);
  if (call.bytes <= paths.everyLink) {
    for (int q = 0; q < n; ++q)
      if (q != rank) io[q] = peers[q]->callerIo();
    CallerIoExecutor x(peers, rank, call, spinUs, yield, io, st);
    fifoOneShotProgram(x, shape);
  } else if (call.bytes <= paths.whereLinksHave) {
    // Links of both kinds: each peer's own (both ends of a link agree).
    for (int q = 0; q < n; ++q) {
      transport::CallerIo* path = q != rank ? peers[q]->callerIo() : nullptr;
      if (path != nullptr && path->callerIoMaxBytes() >= call.bytes) io[q] = path;
    }
    MixedExecutor x(peers, rank, call, spinUs, yield, io, st);
    fifoOneShotProgram(x, shape);
  } else {
    FifoSlotExecutor x(peers, rank, call, call.watch, io, st);
    fifoOneShotProgram(x, shape);
  }
}

}  // namespace coil::algo
