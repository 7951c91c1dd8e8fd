#include "device/peer_allreduce.h"

#include <algorithm>

#include "core/error.h"
#include "device/device_reduce.h"
#include "reduce/reduce.h"

namespace coil::device {

Slice peerSlice(size_t elements, size_t elementBytes, int nranks, int rank) {
  const size_t unit = std::max<size_t>(1, kPeerSliceAlignBytes / elementBytes);
  const size_t n = static_cast<size_t>(nranks);
  const size_t perRank = (elements + n - 1) / n;
  const size_t sliceElements = (perRank + unit - 1) / unit * unit;
  const size_t first = std::min(elements, sliceElements * static_cast<size_t>(rank));
  return {first, std::min(sliceElements, elements - first)};
}

std::vector<StagedStream::Phase> peerAllReducePhases(const PeerAllReduceCall& call,
                                                     const std::vector<PeerWindow>& windows,
                                                     size_t regionBytes, int rank,
                                                     std::function<void()> barrier) {
  const size_t elementBytes = reduce::typeSize(call.type);
  const size_t chunkElements = regionBytes / elementBytes;
  if (chunkElements == 0)
    fail(coilInternalError, "peer all-reduce: a region of ", regionBytes, " bytes holds no ",
         reduce::typeName(call.type));
  const int nranks = static_cast<int>(windows.size());
  const auto* send = static_cast<const uint8_t*>(call.sendbuff);
  auto* recv = static_cast<uint8_t*>(call.recvbuff);
  const PeerWindow mine = windows[static_cast<size_t>(rank)];
  std::vector<StagedStream::Phase> phases;
  for (size_t done = 0; done < call.count; done += chunkElements) {
    const size_t elements = std::min(chunkElements, call.count - done);
    const size_t offset = done * elementBytes;
    // A: my input, where every rank can read it.
    phases.push_back({[=](Stream s) { copyAsync(mine.in, send + offset, elements * elementBytes, s); },
                      barrier});
    // B: my slice, reduced over every rank's input, in rank order.
    phases.push_back({[=](Stream s) {
                        const Slice my = peerSlice(elements, elementBytes, nranks, rank);
                        if (my.count == 0) return;
                        const size_t at = my.first * elementBytes;
                        uint8_t* out = mine.out + at;
                        if (nranks == 1) {
                          copyAsync(out, mine.in + at, my.count * elementBytes, s);
                        } else {
                          reduceAsync(out, windows[0].in + at, windows[1].in + at, my.count,
                                      call.type, call.op, s);
                          for (int q = 2; q < nranks; ++q)
                            reduceAsync(out, out, windows[static_cast<size_t>(q)].in + at,
                                        my.count, call.type, call.op, s);
                        }
                        if (call.op == coilAvg)
                          divideAsync(out, out, my.count, call.type, nranks, s);
                      },
                      barrier});
    // C: every rank's reduced slice, into my output.
    phases.push_back({[=](Stream s) {
                        for (int q = 0; q < nranks; ++q) {
                          const Slice theirs = peerSlice(elements, elementBytes, nranks, q);
                          const size_t at = theirs.first * elementBytes;
                          copyAsync(recv + offset + at, windows[static_cast<size_t>(q)].out + at,
                                    theirs.count * elementBytes, s);
                        }
                      },
                      barrier});
  }
  return phases;
}

}  // namespace coil::device
