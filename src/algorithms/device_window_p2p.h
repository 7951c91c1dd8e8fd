// Sends and receives of device buffers between ranks that map each other's
// peer windows (api/peer_windows.h): a batch of them (a group's) moves
// each message through its sender's window, a piece at a time, and the
// only waits are host exchanges of small tokens between the two ranks of
// each pair, not barriers of the whole communicator.
//
// A rank's slot is cut into n partitions of P bytes (256-byte aligned),
// partition d for what it sends to rank d. The messages between two ranks,
// in the order each side posted them (NCCL's matching rule), form one
// sequence of pieces, every message at least one (so that a message of 0
// bytes still meets its match). Round k moves piece k of every pair's
// sequence, in slot k % 2:
//
//   GPU:  each sender copies its piece into partition d of its slot
//   host: ready tokens, sender to receiver, with the message's size (a
//         receive of another size fails, naming both sizes, on both ranks)
//   GPU:  each receiver copies the piece out of its sender's slot
//   host: done tokens, receiver to sender (and whether the receiver failed)
//
// A sender writes a slot again only after the done token of the round
// that last used it. No kernel waits for another rank's kernel (processes
// on one GPU without MPS never run side by side); every wait is the host
// engine's point-to-point, with its deadline and dead-peer checks. A send
// to this rank itself meets its receive as one device copy.
// Per message of S bytes: S copied in, S copied out, 2·⌈S/P⌉ token
// exchanges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "algorithms/device_window_collectives.h"
#include "device/staged_stream.h"

namespace coil::algo {

/// One send or receive of a batch on device memory.
struct DeviceP2p {
  bool isSend;
  void* buffer;
  size_t bytes;
  int peer;
};

/// What the ranks of a pair tell each other each round.
struct P2pToken {
  uint64_t bytes = 0;   // ready: the size of the message the piece belongs to
  uint64_t failed = 0;  // done: 1 when the receiver failed the message
};

/// One host exchange: sends each (peer, token) of `out`, and fills the
/// token of each (peer, token) of `in` from that peer; all at once, as a
/// point-to-point batch (it throws to fail the batch).
using P2pTokenExchange = std::function<void(const std::vector<std::pair<int, P2pToken>>& out,
                                            std::vector<std::pair<int, P2pToken>>* in)>;

/// Bytes of one partition of a slot of `slotBytes` among n ranks; 0 where
/// the slot is too small.
size_t deviceWindowP2pPartBytes(size_t nranks, size_t slotBytes);

/// The phases of one batch on rank `rank` of windows.size().
std::vector<device::StagedStream::Phase> deviceWindowP2pPhases(
    const std::vector<DeviceP2p>& batch, const std::vector<DeviceWindow>& windows,
    size_t slotBytes, int rank, P2pTokenExchange exchange);

}  // namespace coil::algo
