#include "algorithms/device_window_p2p.h"

#include <algorithm>
#include <memory>
#include <string>

#include "core/error.h"
#include "device/device.h"

namespace coil::algo {
namespace {

using device::Stream;
using Phase = device::StagedStream::Phase;
using Tokens = std::vector<std::pair<int, P2pToken>>;

// Piece `index` of a message: [offset, offset + bytes) of it.
struct Piece {
  size_t op;  // the message, by its place in the batch
  size_t offset, bytes;
};

// The pieces of every message to (or from) one peer, in posting order.
std::vector<Piece> piecesOf(const std::vector<DeviceP2p>& batch, const std::vector<size_t>& ops,
                            size_t partBytes) {
  std::vector<Piece> pieces;
  for (size_t op : ops) {
    const size_t bytes = batch[op].bytes;
    size_t offset = 0;
    do {
      const size_t len = std::min(partBytes, bytes - offset);
      pieces.push_back({op, offset, len});
      offset += len;
    } while (offset < bytes);
  }
  return pieces;
}

// What the host steps of one batch share: the first mismatch a receiver saw.
struct BatchState {
  std::string mismatch;
};

}  // namespace

size_t deviceWindowP2pPartBytes(size_t nranks, size_t slotBytes) {
  if (nranks == 0) return 0;
  return slotBytes / nranks / kDeviceSliceAlignBytes * kDeviceSliceAlignBytes;
}

std::vector<Phase> deviceWindowP2pPhases(const std::vector<DeviceP2p>& batch,
                                         const std::vector<DeviceWindow>& windows,
                                         size_t slotBytes, int rank, P2pTokenExchange exchange) {
  const int n = static_cast<int>(windows.size());
  const size_t part = deviceWindowP2pPartBytes(static_cast<size_t>(n), slotBytes);
  if (part == 0)
    fail(coilInternalError, "device window send/receive: a slot of ", slotBytes,
         " bytes is too small for ", n, " ranks' partitions");
  std::vector<std::vector<size_t>> sendsTo(static_cast<size_t>(n)), recvsFrom(sendsTo.size());
  std::vector<size_t> selfSends, selfRecvs;
  for (size_t i = 0; i < batch.size(); ++i) {
    const DeviceP2p& op = batch[i];
    if (op.peer < 0 || op.peer >= n)
      fail(coilInternalError, "device window send/receive: peer ", op.peer, " of ", n);
    if (op.peer == rank) (op.isSend ? selfSends : selfRecvs).push_back(i);
    else (op.isSend ? sendsTo : recvsFrom)[static_cast<size_t>(op.peer)].push_back(i);
  }
  if (selfSends.size() != selfRecvs.size())
    fail(coilInvalidUsage, selfSends.size(), " send(s) to this rank itself but ", selfRecvs.size(),
         " receive(s) from it in one group; each needs its match in the same group");
  for (size_t k = 0; k < selfSends.size(); ++k)
    if (batch[selfSends[k]].bytes != batch[selfRecvs[k]].bytes)
      fail(coilInvalidUsage, "a send of ", batch[selfSends[k]].bytes,
           " bytes to this rank itself meets a receive of ", batch[selfRecvs[k]].bytes, " bytes");

  std::vector<std::vector<Piece>> sendPieces(sendsTo.size()), recvPieces(sendsTo.size());
  size_t rounds = 0;
  for (size_t q = 0; q < sendsTo.size(); ++q) {
    sendPieces[q] = piecesOf(batch, sendsTo[q], part);
    recvPieces[q] = piecesOf(batch, recvsFrom[q], part);
    rounds = std::max({rounds, sendPieces[q].size(), recvPieces[q].size()});
  }

  std::vector<Phase> phases;
  // Sends to this rank itself: one device copy each, first.
  if (!selfSends.empty()) {
    std::vector<std::pair<void*, const void*>> copies;
    std::vector<size_t> bytes;
    for (size_t k = 0; k < selfSends.size(); ++k) {
      copies.push_back({batch[selfRecvs[k]].buffer, batch[selfSends[k]].buffer});
      bytes.push_back(batch[selfSends[k]].bytes);
    }
    phases.push_back({[copies, bytes](Stream s) {
                        for (size_t k = 0; k < copies.size(); ++k)
                          if (bytes[k] > 0 && copies[k].first != copies[k].second)
                            device::copyAsync(copies[k].first, copies[k].second, bytes[k], s);
                      },
                      nullptr});
  }

  auto state = std::make_shared<BatchState>();
  auto bufferAt = [&batch](const Piece& p) {
    return static_cast<uint8_t*>(batch[p.op].buffer) + p.offset;
  };
  for (size_t r = 0; r < rounds; ++r) {
    const int slot = static_cast<int>(r % 2);
    // Ready: each sender's piece into its partition for the receiver.
    struct Copy {
      void* dst;
      const void* src;
      size_t bytes;
    };
    std::vector<Copy> puts, takes;
    Tokens ready, readyIn, done, doneIn;
    std::vector<std::pair<int, size_t>> expected;  // (peer, the receive's bytes)
    for (int q = 0; q < n; ++q) {
      const auto uq = static_cast<size_t>(q);
      if (r < sendPieces[uq].size()) {
        const Piece& p = sendPieces[uq][r];
        puts.push_back({windows[static_cast<size_t>(rank)].slot[slot] + uq * part, bufferAt(p),
                        p.bytes});
        ready.push_back({q, P2pToken{batch[p.op].bytes, 0}});
        doneIn.push_back({q, P2pToken{}});
      }
      if (r < recvPieces[uq].size()) {
        const Piece& p = recvPieces[uq][r];
        takes.push_back({bufferAt(p),
                         windows[uq].slot[slot] + static_cast<size_t>(rank) * part, p.bytes});
        readyIn.push_back({q, P2pToken{}});
        expected.push_back({q, batch[p.op].bytes});
        done.push_back({q, P2pToken{}});
      }
    }
    auto copyAll = [](std::vector<Copy> copies) {
      return [copies = std::move(copies)](Stream s) {
        for (const Copy& c : copies)
          if (c.bytes > 0) device::copyAsync(c.dst, c.src, c.bytes, s);
      };
    };
    // The ready step records a size mismatch and does not throw: the done
    // step must still tell the sender, or it would wait out its deadline.
    phases.push_back({copyAll(std::move(puts)), [exchange, state, ready, readyIn, expected]() mutable {
                        exchange(ready, &readyIn);
                        for (size_t i = 0; i < readyIn.size(); ++i)
                          if (readyIn[i].second.bytes != expected[i].second && state->mismatch.empty())
                            state->mismatch = "rank " + std::to_string(readyIn[i].first) +
                                              " sends a message of " +
                                              std::to_string(readyIn[i].second.bytes) +
                                              " bytes where this rank receives " +
                                              std::to_string(expected[i].second) + " bytes";
                      }});
    phases.push_back({copyAll(std::move(takes)), [exchange, state, done, doneIn]() mutable {
                        for (auto& d : done) d.second.failed = state->mismatch.empty() ? 0 : 1;
                        exchange(done, &doneIn);
                        if (!state->mismatch.empty())
                          fail(coilInvalidUsage, state->mismatch,
                               "; a send and its receive must have one size");
                        for (const auto& [peer, token] : doneIn)
                          if (token.failed)
                            fail(coilInvalidUsage, "rank ", peer,
                                 " receives a message of another size than this rank sends it; a "
                                 "send and its receive must have one size");
                      }});
  }
  return phases;
}

}  // namespace coil::algo
