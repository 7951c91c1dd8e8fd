#include "algorithms/caller_path_executor.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace coil::algo {
namespace {

// Scratch pieces of the calling thread (each of pieceBytes, the largest
// piece asked for yet), reused call after call so that a warm call
// allocates nothing: one receives a piece to be reduced, others hold
// reduced pieces while their sends are in flight (at most one per peer), so
// the pool stays at a few pieces.
struct ScratchPool {
  std::vector<std::unique_ptr<uint8_t[]>> pieces;
  size_t pieceBytes = 0;
};

ScratchPool& scratchPool() {
  thread_local ScratchPool pool;
  return pool;
}

bool overlaps(const uint8_t* a, size_t aBytes, const uint8_t* b, size_t bBytes) {
  return a < b + bBytes && b < a + aBytes;
}

}  // namespace

size_t CallerPathExecutor::largestPiece(const std::vector<transport::Connection*>& peers) {
  size_t piece = SIZE_MAX;
  for (transport::Connection* c : peers) {
    if (c == nullptr) continue;
    transport::CallerIo* io = c->callerIo();
    piece = std::min(piece, io ? io->callerIoMaxBytes() : 0);
  }
  return piece == SIZE_MAX ? 0 : piece;
}

CallerPathExecutor::CallerPathExecutor(const std::vector<transport::Connection*>& peers,
                                       const Call& call, int spinUs, bool yield)
    : call_(call),
      fifoCall_(call),
      sendsAdvance_(*this, call.watch.stall),
      fifo_(peers, fifoCall_),
      wait_(call, spinUs, yield),
      esize_(call.elementBytes),
      pieceElems_(std::max<size_t>(1, call.chunkElems)),
      sliceElems_(call.sliceElems),
      nranks_(static_cast<int>(peers.size())),
      reduceFn_(reduce::kernel(call.type, call.reduceOp)),
      divideFn_(call.reduceOp == coilAvg ? reduce::divider(call.type) : nullptr),
      io_(peers.size(), nullptr),
      sending_(peers.size()) {
  fifoCall_.watch.stall = &sendsAdvance_;  // fifo_ holds fifoCall_ by reference
  bool fifoLinks = false;
  for (size_t q = 0; q < peers.size(); ++q) {
    if (peers[q] == nullptr) continue;
    transport::CallerIo* io = peers[q]->callerIo();
    if (io == nullptr || io->callerIoMaxBytes() == 0) {
      fifoLinks = true;
      continue;
    }
    transportName_ = peers[q]->traits().name;
    io_[q] = io;
    if (io->callerIoMaxBytes() < pieceElems_ * esize_)
      fail(coilInternalError, call.description(), ": rank ", q,
           " has no caller-driven path for pieces of ", pieceElems_ * esize_, " bytes");
  }
  if (fifoLinks && (sliceElems_ == 0 || pieceElems_ % sliceElems_ != 0))
    fail(coilInternalError, call.description(), ": pieces of ", pieceElems_,
         " elements are not whole FIFO slices of ", sliceElems_);
  // Pieces only grow: a chain's smaller chunk between two all-reduces keeps them.
  ScratchPool& pool = scratchPool();
  if (pool.pieceBytes < pieceElems_ * esize_) {
    pool.pieces.clear();
    pool.pieceBytes = pieceElems_ * esize_;
  }
}

template <typename Done>
void CallerPathExecutor::waitUntil(Done&& done) {
  group_.clear();
  for (size_t q = 0; q < io_.size(); ++q)
    if (io_[q] != nullptr && (sending_[q].data != nullptr || static_cast<int>(q) == receivingFrom_))
      group_.push_back(io_[q]);
  if (group_.empty()) return;
  wait_.until(group_, done,
              [&] {
                std::vector<int> missing;
                for (int q = 0; q < nranks_; ++q)
                  if (q == receivingFrom_ || (io_[q] != nullptr && sendInFlight(q)))
                    missing.push_back(q);
                return missing;
              },
              transportName_);
}

template <typename Body>
void CallerPathExecutor::forPieces(size_t offset, size_t count, Body&& body) {
  for (size_t done = 0; done < count; done += pieceElems_)
    body(offset + done, std::min(pieceElems_, count - done));
}

void CallerPathExecutor::waitSendLeft(int to) {
  if (sending_[to].data == nullptr) return;
  transport::CallerIo* io = io_[to];
  if (!io->sendComplete()) waitUntil([io] { return io->sendComplete(); });
  sending_[to] = InFlight{};
}

void CallerPathExecutor::startSend(int to, const void* data, size_t bytes) {
  waitSendLeft(to);
  io_[to]->beginSend(data, bytes, call_.tag);
  sending_[to] = InFlight{static_cast<const uint8_t*>(data), bytes};
  // Into the socket now: the kernel delivers it while this rank goes on.
  io_[to]->advance();
  if (!io_[to]->failure().empty())
    fail(coilRemoteError, call_.description(), ": ", io_[to]->failure());
}

void CallerPathExecutor::receive(int from, void* dst, size_t bytes) {
  transport::CallerIo* io = io_[from];
  io->beginRecv(dst, bytes, call_.tag);
  receivingFrom_ = from;
  size_t got = 0;
  uint64_t tag = 0;
  waitUntil([&] { return io->recvComplete(&got, &tag); });
  receivingFrom_ = -1;
  checkArrival(call_, from, tag, got, bytes);
}

void CallerPathExecutor::beforeWriting(const void* p, size_t bytes) {
  const auto* first = static_cast<const uint8_t*>(p);
  for (int q = 0; q < nranks_; ++q)
    if (sendInFlight(q) && overlaps(sending_[q].data, sending_[q].bytes, first, bytes))
      waitSendLeft(q);
}

uint8_t* CallerPathExecutor::freeScratch(const uint8_t* besides) {
  ScratchPool& pool = scratchPool();
  for (auto& piece : pool.pieces) {
    uint8_t* p = piece.get();
    if (p == besides) continue;
    bool busy = false;
    for (int q = 0; q < nranks_ && !busy; ++q) busy = sending_[q].data == p && sendInFlight(q);
    if (!busy) return p;
  }
  pool.pieces.push_back(std::make_unique<uint8_t[]>(pool.pieceBytes));
  return pool.pieces.back().get();
}

void CallerPathExecutor::finish(void* data, size_t count) {
  if (divideFn_) divideFn_(data, data, count, nranks_);
}

void CallerPathExecutor::drain() {
  for (int q = 0; q < nranks_; ++q) waitSendLeft(q);
}

// ---- the FIFO links --------------------------------------------------------------

void CallerPathExecutor::SendsAdvance::check() const {
  if (inner_ != nullptr) inner_->check();
  owner_.advanceSends();
}

void CallerPathExecutor::advanceSends() const {
  for (int q = 0; q < nranks_; ++q) {
    if (!sendInFlight(q)) continue;
    io_[q]->advance();
    if (!io_[q]->failure().empty())
      fail(coilRemoteError, call_.description(), ": ", io_[q]->failure());
  }
}

void CallerPathExecutor::beforeFifoPrimitive(size_t offset, size_t count) {
  if (count != 0) beforeWriting(out(offset), count * esize_);
  advanceSends();
}

template <typename Take>
void CallerPathExecutor::fromSlots(int from, size_t o, size_t n, Take&& take) {
  advanceSends();
  for (size_t d = 0; d < n; d += sliceElems_) {
    const size_t k = std::min(sliceElems_, n - d);
    take(static_cast<const uint8_t*>(fifo_.waitIncoming(from, k * esize_)), o + d, k);
    fifo_.doneIncoming(from);
  }
}

template <typename Fill>
void CallerPathExecutor::intoSlots(int to, size_t n, Fill&& fill) {
  advanceSends();
  for (size_t d = 0; d < n; d += sliceElems_) {
    const size_t k = std::min(sliceElems_, n - d);
    fill(static_cast<uint8_t*>(fifo_.waitOutgoing(to)), d, k);
    fifo_.publishOutgoing(to, k * esize_);
  }
}

void CallerPathExecutor::reduceArriving(int from, uint8_t* dst, size_t o, size_t n) {
  if (onFifo(from)) {
    beforeWriting(dst, n * esize_);
    fromSlots(from, o, n, [&](const uint8_t* slot, size_t at, size_t k) {
      reduceFn_(dst + (at - o) * esize_, slot, in(at), k);
    });
    return;
  }
  uint8_t* arrived = freeScratch(dst);
  receive(from, arrived, n * esize_);
  beforeWriting(dst, n * esize_);
  reduceFn_(dst, arrived, in(o), n);
}

void CallerPathExecutor::receiveInto(int from, size_t o, size_t n) {
  if (!onFifo(from)) return receive(from, out(o), n * esize_);
  fromSlots(from, o, n, [&](const uint8_t* slot, size_t at, size_t k) {
    std::memcpy(out(at), slot, k * esize_);
  });
}

void CallerPathExecutor::sendFrom(int to, const uint8_t* src, size_t n) {
  if (!onFifo(to)) return startSend(to, src, n * esize_);
  intoSlots(to, n, [&](uint8_t* slot, size_t d, size_t k) {
    std::memcpy(slot, src + d * esize_, k * esize_);
  });
}

// ---- the primitives -----------------------------------------------------------
// Each runs on the FIFO executor when all its links are FIFOs, else a piece
// at a time, each link its own way.

void CallerPathExecutor::send(int to, size_t offset, size_t count) {
  if (onFifo(to)) {
    beforeFifoPrimitive(offset, 0);
    return fifo_.send(to, offset, count);
  }
  forPieces(offset, count, [&](size_t o, size_t n) { startSend(to, in(o), n * esize_); });
}

void CallerPathExecutor::recv(int from, size_t offset, size_t count) {
  if (onFifo(from)) {
    beforeFifoPrimitive(offset, count);
    return fifo_.recv(from, offset, count);
  }
  forPieces(offset, count, [&](size_t o, size_t n) {
    beforeWriting(out(o), n * esize_);
    receiveInto(from, o, n);
  });
}

void CallerPathExecutor::recvReduceSend(int from, int to, size_t offset, size_t count) {
  if (onFifo(from) && onFifo(to)) {
    beforeFifoPrimitive(offset, 0);
    return fifo_.recvReduceSend(from, to, offset, count);
  }
  forPieces(offset, count, [&](size_t o, size_t n) {
    if (onFifo(to)) {  // reduced straight into the slots, as the FIFO executor does
      uint8_t* arrived = freeScratch(nullptr);
      receive(from, arrived, n * esize_);
      intoSlots(to, n, [&](uint8_t* slot, size_t d, size_t k) {
        reduceFn_(slot, arrived + d * esize_, in(o + d), k);
      });
      return;
    }
    uint8_t* reduced = freeScratch(nullptr);
    reduceArriving(from, reduced, o, n);
    startSend(to, reduced, n * esize_);
  });
}

void CallerPathExecutor::receiveReduced(int from, size_t o, size_t n, bool finished) {
  reduceArriving(from, out(o), o, n);
  if (finished) finish(out(o), n);
}

void CallerPathExecutor::recvReduceCopySend(int from, int to, size_t offset, size_t count) {
  if (onFifo(from) && onFifo(to)) {
    beforeFifoPrimitive(offset, count);
    return fifo_.recvReduceCopySend(from, to, offset, count);
  }
  forPieces(offset, count, [&](size_t o, size_t n) {
    receiveReduced(from, o, n, true);
    sendFrom(to, out(o), n);
  });
}

void CallerPathExecutor::recvCopySend(int from, int to, size_t offset, size_t count) {
  if (onFifo(from) && onFifo(to)) {
    beforeFifoPrimitive(offset, count);
    return fifo_.recvCopySend(from, to, offset, count);
  }
  forPieces(offset, count, [&](size_t o, size_t n) {
    beforeWriting(out(o), n * esize_);
    receiveInto(from, o, n);
    sendFrom(to, out(o), n);
  });
}

void CallerPathExecutor::recvReduceCopy(int from, size_t offset, size_t count) {
  if (onFifo(from)) {
    beforeFifoPrimitive(offset, count);
    return fifo_.recvReduceCopy(from, offset, count);
  }
  forPieces(offset, count, [&](size_t o, size_t n) { receiveReduced(from, o, n, true); });
}

void CallerPathExecutor::recvReduce(int from, size_t offset, size_t count) {
  if (onFifo(from)) {
    beforeFifoPrimitive(offset, count);
    return fifo_.recvReduce(from, offset, count);
  }
  forPieces(offset, count, [&](size_t o, size_t n) { receiveReduced(from, o, n, false); });
}

void CallerPathExecutor::copy(size_t inOffset, size_t outOffset, size_t count) {
  if (count == 0) return;
  beforeWriting(out(outOffset), count * esize_);
  if (in(inOffset) != out(outOffset)) std::memmove(out(outOffset), in(inOffset), count * esize_);
  finish(out(outOffset), count);
}

// Both directions at once, piece by piece: the send is in flight (or in the
// FIFO, at most a chunk: half of it) while the receive waits, so two ranks
// exchanging with each other never block.
void CallerPathExecutor::sendRecv(int to, size_t inOffset, int from, size_t outOffset,
                                  size_t count) {
  if (onFifo(to) && onFifo(from)) {
    beforeFifoPrimitive(outOffset, count);
    return fifo_.sendRecv(to, inOffset, from, outOffset, count);
  }
  forPieces(0, count, [&](size_t done, size_t n) {
    beforeWriting(out(outOffset + done), n * esize_);
    sendFrom(to, in(inOffset + done), n);
    receiveInto(from, outOffset + done, n);
  });
}

}  // namespace coil::algo
