// The cost model's predictions, as coil_perf needs them for --calibrate and
// --predict: coil_perf's parameters fed to the tuner's own formulas
// (src/tune/cost_formulas.h, linked as coil_cost_formulas; coil_perf is
// otherwise a client of the public API only).
//
//   ring all-reduce, tree all-reduce, all-gather: see cost_formulas.h
//   one rank         S·β (a local copy)
//   β and γ × memoryFactor when S > cacheBytes / (4n)
#pragma once

#include <cstddef>
#include <string>

namespace coil_perf {

/// α-β-γ parameters of one transport, in the units of COIL_TUNE.
struct ModelParams {
  double alphaUs = 0;         ///< µs per step (a slot hand-off)
  double betaUsPerByte = 0;   ///< µs per byte moved over a link
  double gammaUsPerByte = 0;  ///< µs per byte reduced
  /// β and γ are multiplied by this once the ranks' buffers outgrow the
  /// last-level cache: S > cacheBytes / (4n), as in the tuner.
  double memoryFactor = 1;
  size_t cacheBytes = 0;  ///< the machine's (not in the file); 0: the factor never applies
};

/// A transport's calibration: the FIFO algorithms' parameters, and the
/// tree's own, which differ in β where the tree's β was fitted (the
/// "T/tree" line of the file).
struct Calibration {
  ModelParams ring;
  ModelParams tree;
};

/// memoryFactor when `bytes` (per rank) outgrow the cache, else 1.
double memoryScale(const ModelParams& m, int nranks, double bytes);

/// Predicted µs of a ring all-reduce of `bytes` per rank.
double predictRingAllReduceUs(const ModelParams& m, int nranks, double bytes, size_t chunkBytes);
/// Predicted µs of a double-binary-tree all-reduce of `bytes` per rank.
double predictTreeAllReduceUs(const ModelParams& m, int nranks, double bytes, size_t chunkBytes);
/// Predicted µs of a ring all-gather of `bytes` in all (n blocks).
double predictAllGatherUs(const ModelParams& m, int nranks, double bytes);

/// The ring/tree chunk coil will use on `transport` ("shm" or "tcp") with
/// the current environment: one FIFO slot (rounded down to 64 bytes) times
/// half the slot count, from COIL_SHM_SLOTS/COIL_SHM_SLOT_BYTES or
/// COIL_TCP_SLOTS/COIL_TCP_SLOT_BYTES/COIL_NSOCKS and coil's defaults.
/// An estimate: the public API does not report it (mirrors
/// Communicator::agreeOnSlices and the transports' defaults).
size_t estimatedChunkBytes(const std::string& transport);

}  // namespace coil_perf
