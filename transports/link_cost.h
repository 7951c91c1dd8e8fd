// LinkCost: the α-β-γ parameters of the cost model (src/tune/tuner.h, where
// it is tune::Cost) for one way of moving data: a transport states its own
// (transport.h, Traits), the tuner keeps one per algorithm.
#pragma once

namespace coil::transport {

/// α: µs per step; β: µs per byte moved; γ: µs per byte reduced beside the
/// copies. β and γ hold while the data stays in the caches; beyond them
/// (the ranks' buffers outgrow the last-level cache) both are multiplied by
/// memoryFactor (1 for a path that streams to memory anyway).
struct LinkCost {
  double alphaUs;
  double betaUsPerB;
  double gammaUsPerB;
  double memoryFactor = 1.0;
};

}  // namespace coil::transport
