// Mirrors src/tune/tuner.cc (Model::predictUs: AllReduce kRing and kTree,
// AllGather) and the chunk size of src/comm/communicator.cc
// (agreeOnSlices). Keep the two in step.
#include "predict.h"

#include "algorithms/tree_shape.h"  // header-only: the tree coil runs

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace coil_perf {
namespace {

long envLong(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long value = std::strtol(v, &end, 10);
  return (*end == '\0' && value > 0) ? value : fallback;
}

}  // namespace

double memoryScale(const ModelParams& m, int nranks, double bytes) {
  if (m.cacheBytes == 0 || nranks < 1) return 1.0;
  return bytes > static_cast<double>(m.cacheBytes / (4 * static_cast<size_t>(nranks)))
             ? m.memoryFactor
             : 1.0;
}

double predictRingAllReduceUs(const ModelParams& m, int nranks, double bytes, size_t chunkBytes) {
  const double S = bytes, N = nranks;
  if (nranks == 1) return S * m.betaUsPerByte;
  const double C = std::max(1.0, static_cast<double>(chunkBytes));
  const double f = (N - 1) / N, k = memoryScale(m, nranks, S);
  const double rounds = std::max(1.0, std::ceil(S / (N * C)));
  return 2 * (N - 1) * rounds * m.alphaUs + k * (2 * f * S * m.betaUsPerByte + f * S * m.gammaUsPerByte);
}

double predictTreeAllReduceUs(const ModelParams& m, int nranks, double bytes, size_t chunkBytes) {
  const double S = bytes;
  if (nranks == 1) return S * m.betaUsPerByte;
  const double C = std::max(1.0, static_cast<double>(chunkBytes));
  const double chunks = std::max(1.0, std::ceil(S / (2 * C))), k = memoryScale(m, nranks, S);
  const coil::algo::TreeLoad load = coil::algo::doubleTreeLoad(nranks);
  return (2 * load.depth + 2 * (chunks - 1)) * m.alphaUs +
         k * (load.sentPerByte * S * m.betaUsPerByte + load.reducedPerByte * S * m.gammaUsPerByte);
}

double predictAllGatherUs(const ModelParams& m, int nranks, double bytes) {
  const double S = bytes, N = nranks;
  if (nranks == 1) return S * m.betaUsPerByte;
  return (N - 1) * m.alphaUs + memoryScale(m, nranks, S) * (N - 1) / N * S * m.betaUsPerByte;
}

size_t estimatedChunkBytes(const std::string& transport) {
  long slots = 8;
  long slotBytes = 256 << 10;  // shm defaults
  if (transport == "tcp") {
    // With only COIL_NSOCKS set, tcp grows the slot count to cover the sockets.
    const long nsocks = envLong("COIL_NSOCKS", 4);
    slots = 8;
    while (slots < nsocks) slots *= 2;
    slots = envLong("COIL_TCP_SLOTS", slots);
    slotBytes = envLong("COIL_TCP_SLOT_BYTES", 512 << 10);
  } else {
    slots = envLong("COIL_SHM_SLOTS", slots);
    slotBytes = envLong("COIL_SHM_SLOT_BYTES", slotBytes);
  }
  const size_t slice = static_cast<size_t>(slotBytes) / 64 * 64;
  return slice * std::max<size_t>(1, static_cast<size_t>(slots) / 2);
}

}  // namespace coil_perf
