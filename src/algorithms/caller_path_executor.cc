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
      wait_(call, spinUs, yield),
      esize_(call.elementBytes),
      pieceElems_(std::max<size_t>(1, call.chunkElems)),
      nranks_(static_cast<int>(peers.size())),
      reduceFn_(reduce::kernel(call.type, call.reduceOp)),
      divideFn_(call.reduceOp == coilAvg ? reduce::divider(call.type) : nullptr),
      io_(peers.size(), nullptr),
      sending_(peers.size()) {
  for (size_t q = 0; q < peers.size(); ++q) {
    if (peers[q] == nullptr) continue;
    transportName_ = peers[q]->traits().name;
    io_[q] = peers[q]->callerIo();
    if (io_[q] == nullptr || io_[q]->callerIoMaxBytes() < pieceElems_ * esize_)
      fail(coilInternalError, call.description(), ": rank ", q,
           " has no caller-driven path for pieces of ", pieceElems_ * esize_, " bytes");
  }
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

// ---- the primitives -----------------------------------------------------------

void CallerPathExecutor::send(int to, size_t offset, size_t count) {
  forPieces(offset, count, [&](size_t o, size_t n) { startSend(to, in(o), n * esize_); });
}

void CallerPathExecutor::recv(int from, size_t offset, size_t count) {
  forPieces(offset, count, [&](size_t o, size_t n) {
    beforeWriting(out(o), n * esize_);
    receive(from, out(o), n * esize_);
  });
}

void CallerPathExecutor::recvReduceSend(int from, int to, size_t offset, size_t count) {
  forPieces(offset, count, [&](size_t o, size_t n) {
    uint8_t* arrived = freeScratch(nullptr);
    receive(from, arrived, n * esize_);
    uint8_t* reduced = freeScratch(arrived);
    reduceFn_(reduced, arrived, in(o), n);
    startSend(to, reduced, n * esize_);
  });
}

void CallerPathExecutor::receiveReduced(int from, size_t o, size_t n, bool finished) {
  uint8_t* arrived = freeScratch(nullptr);
  receive(from, arrived, n * esize_);
  beforeWriting(out(o), n * esize_);
  reduceFn_(out(o), arrived, in(o), n);
  if (finished) finish(out(o), n);
}

void CallerPathExecutor::recvReduceCopySend(int from, int to, size_t offset, size_t count) {
  forPieces(offset, count, [&](size_t o, size_t n) {
    receiveReduced(from, o, n, true);
    startSend(to, out(o), n * esize_);
  });
}

void CallerPathExecutor::recvCopySend(int from, int to, size_t offset, size_t count) {
  forPieces(offset, count, [&](size_t o, size_t n) {
    beforeWriting(out(o), n * esize_);
    receive(from, out(o), n * esize_);
    startSend(to, out(o), n * esize_);
  });
}

void CallerPathExecutor::recvReduceCopy(int from, size_t offset, size_t count) {
  forPieces(offset, count, [&](size_t o, size_t n) { receiveReduced(from, o, n, true); });
}

void CallerPathExecutor::recvReduce(int from, size_t offset, size_t count) {
  forPieces(offset, count, [&](size_t o, size_t n) { receiveReduced(from, o, n, false); });
}

void CallerPathExecutor::copy(size_t inOffset, size_t outOffset, size_t count) {
  if (count == 0) return;
  beforeWriting(out(outOffset), count * esize_);
  if (in(inOffset) != out(outOffset)) std::memmove(out(outOffset), in(inOffset), count * esize_);
  finish(out(outOffset), count);
}

// Both directions at once, piece by piece: the send is in flight while the
// receive waits, so two ranks exchanging with each other never block.
void CallerPathExecutor::sendRecv(int to, size_t inOffset, int from, size_t outOffset,
                                  size_t count) {
  forPieces(0, count, [&](size_t done, size_t n) {
    beforeWriting(out(outOffset + done), n * esize_);
    startSend(to, in(inOffset + done), n * esize_);
    receive(from, out(outOffset + done), n * esize_);
  });
}

}  // namespace coil::algo
