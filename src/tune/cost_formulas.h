// The α-β-γ formulas of the FIFO algorithms, as pure functions: the one
// copy that the tuner (tuner.cc, Model::predictUs) and coil_perf's
// --calibrate/--predict (benchmarks/perf) both call. No state, no
// environment, nothing of libcoil beyond two header-only types, so a client
// of the public API links it too (src/tune/meson.build: coil_cost_formulas).
//
//   n ranks, S bytes (all-reduce: the buffer; all-gather and reduce-scatter:
//   all n blocks), C chunk bytes, f = (n-1)/n; `m` already holds the β and γ
//   that apply at this size (memoryScaled):
//   ring all-reduce   2(n-1)·rounds·α + 2f·S·β + f·S·γ,   rounds = max(1, ⌈S/(n·C)⌉)
//   tree all-reduce   (2·depth + 2·(chunks-1))·α + L·S·β + R·S·γ,  chunks = max(1, ⌈S/2C⌉)
//                     (depth, L, R: the busiest rank, doubleTreeLoad in tree_shape.h)
//   all-gather        (n-1)·α + f·S·β         reduce-scatter: + f·S·γ
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/tree_shape.h"
#include "transports/link_cost.h"

namespace coil::tune {

/// True when n ranks' buffers of `bytes` outgrow the last-level cache:
/// S > cacheBytes / (4n) (inputs and outputs of n ranks); never for cacheBytes 0.
bool outgrowsCache(uint64_t cacheBytes, int nranks, double bytes);
/// `m` with β and γ × memoryFactor where outgrowsCache.
transport::LinkCost memoryScaled(transport::LinkCost m, uint64_t cacheBytes, int nranks,
                                 double bytes);

double ringAllReduceUs(const transport::LinkCost& m, int nranks, double bytes, double chunkBytes);
double treeAllReduceUs(const transport::LinkCost& m, const algo::TreeLoad& load, double bytes,
                       double chunkBytes);
/// All-gather (reduces = false) or reduce-scatter (true) around the ring.
double ringGatherUs(const transport::LinkCost& m, int nranks, double bytes, bool reduces);
/// Hierarchical all-gather (reduces = false) or reduce-scatter (true),
/// hierarchical.cc, over `hosts` hosts of between `smallest` and `largest`
/// ranks: `link` across hosts, `local` inside.
///   (H-1)·α + (H-1)/H·S·β [+ (H-1)/H·S·γ]          one rail per owner, sharing the link
///   + (L-1 + K·(L-1))·α_l + (n-1)/n·S·β_l [+ (L-1)/L·S·γ_l]   inside the host
double hierGatherUs(const transport::LinkCost& link, const transport::LinkCost& local, int nranks,
                    int hosts, int smallest, int largest, double bytes, bool reduces);

}  // namespace coil::tune
