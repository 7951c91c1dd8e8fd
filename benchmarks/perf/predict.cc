// coil_perf's predictions: the tuner's formulas (src/tune/cost_formulas.h)
// with coil_perf's parameters, and an estimate of coil's chunk size, which
// mirrors src/comm/communicator.cc (agreeOnSlices): the public API does not
// report it.
#include "predict.h"

#include "algorithms/tree_shape.h"  // header-only: the tree coil runs
#include "tune/cost_formulas.h"

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

// The formulas are the tuner's own (src/tune/cost_formulas.h); this file
// only translates coil_perf's parameters into them.
coil::transport::LinkCost linkCost(const ModelParams& m, int nranks, double bytes) {
  return coil::tune::memoryScaled({m.alphaUs, m.betaUsPerByte, m.gammaUsPerByte, m.memoryFactor},
                                  m.cacheBytes, nranks, bytes);
}

}  // namespace

double memoryScale(const ModelParams& m, int nranks, double bytes) {
  return coil::tune::outgrowsCache(m.cacheBytes, nranks, bytes) ? m.memoryFactor : 1.0;
}

double predictRingAllReduceUs(const ModelParams& m, int nranks, double bytes, size_t chunkBytes) {
  if (nranks == 1) return bytes * m.betaUsPerByte;
  return coil::tune::ringAllReduceUs(linkCost(m, nranks, bytes), nranks, bytes,
                                     static_cast<double>(chunkBytes));
}

double predictTreeAllReduceUs(const ModelParams& m, int nranks, double bytes, size_t chunkBytes) {
  if (nranks == 1) return bytes * m.betaUsPerByte;
  return coil::tune::treeAllReduceUs(linkCost(m, nranks, bytes), coil::algo::doubleTreeLoad(nranks),
                                     bytes, static_cast<double>(chunkBytes));
}

double predictAllGatherUs(const ModelParams& m, int nranks, double bytes) {
  if (nranks == 1) return bytes * m.betaUsPerByte;
  return coil::tune::ringGatherUs(linkCost(m, nranks, bytes), nranks, bytes, false);
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
