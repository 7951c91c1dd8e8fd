#include "algorithms/registry.h"

#include "algorithms/collectives.h"

namespace coil::algo {

const std::vector<AlgorithmProgram>& algorithmPrograms() {
  using enum Layout;
  using enum Blocks;
  using enum DeviceOnly;
  using K = CollKind;
  static const std::vector<AlgorithmProgram> programs = {
      {K::AllReduce, "ring", "ringAllReduce", ringAllReduce, kSeparate, kOne, kOne, false,
       "reduce-scatter then all-gather around a ring, n-1 steps each"},
      {K::AllReduce, "tree", "doubleTreeAllReduce", doubleTreeAllReduce, kInPlace, kOne, kOne,
       false, "two binary trees, each reducing half the buffer up and broadcasting it down"},
      {K::AllReduce, "hier", "hierarchicalAllReduce", hierarchicalAllReduce, kInPlace, kOne, kOne,
       false, "a chain inside each host, one ring per rail across hosts, a chain back"},
      {K::AllReduce, "oneshot", "windowOneShotProgram", nullptr, kSeparate, kOne, kOne, false,
       "one host: every rank puts its input in its window slot, then reduces all n slots",
       windowOneShotProgram<WindowTrace>,
       {"fifoOneShotProgram",
        "across hosts: every rank sends its input to every other rank, then reduces all n "
        "inputs in rank order",
        fifoOneShotProgram<FifoOneShotTrace>}},
      {K::AllReduce, "slice", "windowSliceProgram", nullptr, kSeparate, kOne, kOne, false,
       "one host: rank r reduces slice r of every piece from all n slots and publishes it; "
       "every rank copies the others' slices out",
       windowSliceProgram<WindowTrace>},
      {K::AllReduce, "registered", "windowDirectProgram", nullptr, kSeparate, kOne, kOne, false,
       "device buffers registered as windows: rank r reduces slice r of every rank's input "
       "where it lies; every rank copies the others' slices from their outputs",
       windowDirectProgram<WindowTrace>, {}, kRegisteredWindows},
      {K::Broadcast, "ring", "ringBroadcast", ringBroadcast, kSeparate, kOne, kOne, false,
       "a pipelined chain from the root"},
      {K::Broadcast, "tree", "treeBroadcast", treeBroadcast, kInPlaceAtRoot, kOne, kOne, false,
       "a pipelined binary tree from the root"},
      {K::Broadcast, "hier", "hierarchicalBroadcast", hierarchicalBroadcast, kSeparate, kOne, kOne,
       false,
       "a pipelined chain from the root through its host, then host by host: each link "
       "between hosts carries the data once"},
      {K::Broadcast, "peer", "windowPeerBroadcastProgram", nullptr, kSeparate, kOne, kOne, false,
       "device buffers on one host: the root puts each piece in its window slot; every rank "
       "copies it out",
       windowPeerBroadcastProgram<WindowTrace>, {}, kPeerWindows},
      {K::Broadcast, "registered", "windowDirectBroadcastProgram", nullptr, kSeparate, kOne, kOne,
       false,
       "device buffers registered as windows: the root places its input in its output; every "
       "other rank copies it from there",
       windowDirectBroadcastProgram<WindowTrace>, {}, kRegisteredWindows},
      {K::Broadcast, "oneshot", "rootedOneShotProgram", nullptr, kSeparate, kOne, kOne, false,
       "no shared window: the call's agreement carries the data; every rank sends its record, "
       "the root its buffer too, to every rank in one round", nullptr, {}, kNo,
       rootedOneShotProgram<RootedOneShotTrace>},
      {K::Reduce, "chain", "chainReduce", chainReduce, kSeparate, kOne, kOne, false,
       "a pipelined chain into the root"},
      {K::Reduce, "tree", "treeReduce", treeReduce, kAccumulate, kOne, kOne, false,
       "a pipelined binary tree into the root"},
      {K::Reduce, "hier", "hierarchicalReduce", hierarchicalReduce, kSeparate, kOne, kOne, false,
       "a pipelined chain host by host into the root, its host last: each link between hosts "
       "carries the partial sums once"},
      {K::Reduce, "peer", "windowPeerReduceProgram", nullptr, kSeparate, kOne, kOne, false,
       "device buffers on one host: every rank puts each piece in its window slot; the root "
       "reduces all n slots",
       windowPeerReduceProgram<WindowTrace>, {}, kPeerWindows},
      {K::Reduce, "registered", "windowDirectReduceProgram", nullptr, kSeparate, kOne, kOne, false,
       "device buffers registered as windows: the root reduces every rank's input where it "
       "lies",
       windowDirectReduceProgram<WindowTrace>, {}, kRegisteredWindows},
      {K::Reduce, "oneshot", "rootedOneShotProgram", nullptr, kSeparate, kOne, kOne, false,
       "no shared window: the call's agreement carries the data; every rank sends its record "
       "and its input to every rank in one round, the root reduces all n in rank order",
       nullptr, {}, kNo, rootedOneShotProgram<RootedOneShotTrace>},
      {K::AllGather, "ring", "ringAllGather", ringAllGather, kInPlaceOwnBlock, kOne, kPerRank,
       false, "each block travels once around the ring"},
      {K::AllGather, "hier", "hierarchicalAllGather", hierarchicalAllGather, kInPlaceOwnBlock, kOne,
       kPerRank, false,
       "a ring inside each host, one ring per rail across hosts, a chain from each rail's owner"},
      {K::AllGather, "registered", "windowDirectAllGatherProgram", nullptr, kSeparate, kOne,
       kPerRank, false,
       "device buffers registered as windows: every rank places its block in its output, then "
       "copies every other block from its owner's output",
       windowDirectAllGatherProgram<WindowTrace>, {}, kRegisteredWindows},
      {K::AllGather, "peer", "windowPeerAllGatherProgram", nullptr, kSeparate, kOne, kPerRank,
       false,
       "device buffers on one host: every rank puts each piece of its block in its window slot; "
       "every rank copies all n pieces out",
       windowPeerAllGatherProgram<WindowTrace>, {}, kPeerWindows},
      {K::ReduceScatter, "ring", "ringReduceScatter", ringReduceScatter, kSeparate, kPerRank,
       kOne, true, "block b is reduced around the ring, completing at rank b"},
      {K::ReduceScatter, "hier", "hierarchicalReduceScatter", hierarchicalReduceScatter, kScratch,
       kPerRank, kPerRank, false,
       "a chain into each rail's owner inside each host, one ring per rail across hosts, "
       "each block handed to its rank"},
      {K::ReduceScatter, "registered", "windowDirectReduceScatterProgram", nullptr, kSeparate,
       kPerRank, kOne, true,
       "device buffers registered as windows: rank r reduces block r of every rank's input "
       "where it lies",
       windowDirectReduceScatterProgram<WindowTrace>, {}, kRegisteredWindows},
      {K::ReduceScatter, "peer", "windowPeerReduceScatterProgram", nullptr, kSeparate, kPerRank,
       kOne, true,
       "device buffers on one host: every rank puts each piece of all n blocks in its window "
       "slot; rank r reduces block r's from all n slots",
       windowPeerReduceScatterProgram<WindowTrace>, {}, kPeerWindows},
      {K::AllToAll, "pairwise", "pairwiseAllToAll", pairwiseAllToAll, kSeparate, kPerRank,
       kPerRank, false, "in step k, send to rank+k while receiving from rank-k"},
      {K::AllToAll, "peer", "windowPeerAllToAllProgram", nullptr, kSeparate, kPerRank, kPerRank,
       false,
       "device buffers on one host: every rank puts each piece of all n blocks in its window "
       "slot; rank r copies block r's out of every slot",
       windowPeerAllToAllProgram<WindowTrace>, {}, kPeerWindows},
      {K::AllToAll, "registered", "windowDirectAllToAllProgram", nullptr, kSeparate, kPerRank,
       kPerRank, false,
       "device buffers registered as windows: rank r copies block r of every rank's input "
       "where it lies",
       windowDirectAllToAllProgram<WindowTrace>, {}, kRegisteredWindows},
      {K::Gather, "direct", "directGather", directGather, kSeparate, kOne, kPerRank, false,
       "every rank sends its block to the root"},
      {K::Gather, "peer", "windowPeerGatherProgram", nullptr, kSeparate, kOne, kPerRank, false,
       "device buffers on one host: every rank puts each piece of its block in its window slot; "
       "the root copies all n out",
       windowPeerGatherProgram<WindowTrace>, {}, kPeerWindows},
      {K::Gather, "oneshot", "rootedOneShotProgram", nullptr, kSeparate, kOne, kPerRank, false,
       "no shared window: the call's agreement carries the data; every rank sends its record "
       "and its block to every rank in one round, the root keeps all n",
       nullptr, {}, kNo, rootedOneShotProgram<RootedOneShotTrace>},
      {K::Scatter, "direct", "directScatter", directScatter, kSeparate, kPerRank, kOne, false,
       "the root sends every rank its block"},
      {K::Scatter, "peer", "windowPeerScatterProgram", nullptr, kSeparate, kPerRank, kOne, false,
       "device buffers on one host: the root puts each piece of all n blocks in its window slot; "
       "rank r copies block r's out",
       windowPeerScatterProgram<WindowTrace>, {}, kPeerWindows},
      {K::Scatter, "oneshot", "rootedOneShotProgram", nullptr, kSeparate, kPerRank, kOne, false,
       "no shared window: the call's agreement carries the data; every rank sends its record, "
       "the root all n blocks too, to every rank in one round; rank r keeps block r",
       nullptr, {}, kNo, rootedOneShotProgram<RootedOneShotTrace>},
  };
  return programs;
}

const AlgorithmProgram* findProgram(CollKind collective, std::string_view name) {
  if (collective == CollKind::Barrier) collective = CollKind::AllReduce;
  for (const AlgorithmProgram& p : algorithmPrograms())
    if (p.collective == collective && name == p.name) return &p;
  return nullptr;
}

bool parseCollective(std::string_view name, CollKind* kind) {
  for (CollKind k : {CollKind::AllReduce, CollKind::Broadcast, CollKind::Reduce,
                     CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllToAll,
                     CollKind::Gather, CollKind::Scatter, CollKind::Barrier})
    if (name == collName(k)) {
      *kind = k;
      return true;
    }
  return false;
}

std::vector<std::pair<int, size_t>> expectedContributions(CollKind collective, int r, int n,
                                                          size_t count, int root, size_t o) {
  std::vector<std::pair<int, size_t>> e;
  auto all = [&](size_t element) {
    for (int q = 0; q < n; ++q) e.emplace_back(q, element);
  };
  const int block = count ? static_cast<int>(o / count) : 0;
  const size_t within = count ? o % count : 0;
  switch (collective) {
    case CollKind::AllReduce:
    case CollKind::Barrier: all(o); break;
    case CollKind::Broadcast: e.emplace_back(root, o); break;
    case CollKind::Reduce:
      if (r == root) all(o);
      break;
    case CollKind::AllGather: e.emplace_back(block, within); break;
    case CollKind::ReduceScatter: all(static_cast<size_t>(r) * count + o); break;
    case CollKind::AllToAll: e.emplace_back(block, static_cast<size_t>(r) * count + within); break;
    case CollKind::Gather:
      if (r == root) e.emplace_back(block, within);
      break;
    case CollKind::Scatter: e.emplace_back(root, static_cast<size_t>(r) * count + o); break;
    default: break;
  }
  return e;
}

}  // namespace coil::algo
