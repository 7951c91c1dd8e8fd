// An all-reduce of device buffers between ranks that map each other's
// device memory: processes of one host through CUDA IPC, or threads of one
// process. Every rank owns a window of two regions, `in` and `out`, that
// every rank can read (api/peer_windows.h makes and maps them).
//
// Driven from the host, as StagedStream phases: no kernel waits for
// another rank's kernel, which on one GPU shared by processes without MPS
// would be a deadlock (the GPU runs one context at a time). Per chunk of
// at most a region's bytes, with the chunk's elements cut into one slice
// per rank:
//
//   A  copy the chunk of sendbuff into my `in`            | barrier
//   B  out[my slice] = sum over ranks q of in_q[my slice] | barrier
//      (n - 1 element-wise kernels; coilAvg then divides)
//   C  copy each rank q's out_q[slice q] into recvbuff    | barrier
//
// The barrier after A says every `in` is filled; after B every slice is
// reduced; after C nobody reads my window any more, so the next chunk (or
// call) may write it. Each rank reads its slice of every input and every
// reduced slice once: per rank and chunk of S bytes, the GPU reads 3S and
// writes (2 + 1/n)S (docs/performance.md §4.14 derives the bound).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "coil.h"
#include "device/staged_stream.h"

namespace coil::device {

/// One rank's window, as mapped in this process.
struct PeerWindow {
  uint8_t* in;
  uint8_t* out;
};

struct PeerAllReduceCall {
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  coilDataType_t type;
  coilRedOp_t op;  // a built-in op: sum, prod, max, min or avg
};

/// Slices are whole multiples of this many bytes (but the last ones), so
/// that the kernels' vector loads stay aligned.
constexpr size_t kPeerSliceAlignBytes = 256;

/// The elements [first, first + count) of rank `rank`'s slice of a chunk
/// of `elements`, cut into `nranks` slices of whole kPeerSliceAlignBytes.
struct Slice {
  size_t first, count;
};
Slice peerSlice(size_t elements, size_t elementBytes, int nranks, int rank);

/// The phases of one all-reduce on rank `rank` of windows.size(), whose
/// regions hold `regionBytes` each; `barrier` is a host barrier of all
/// ranks (it throws to fail the call).
std::vector<StagedStream::Phase> peerAllReducePhases(const PeerAllReduceCall& call,
                                                     const std::vector<PeerWindow>& windows,
                                                     size_t regionBytes, int rank,
                                                     std::function<void()> barrier);

}  // namespace coil::device
