// Hierarchical all-reduce, all-gather and reduce-scatter: inside each host,
// then across hosts, then inside again (as Horovod's and UCC's split
// rails). For ranks that span hosts joined by a link much slower than each
// host's shared memory. The all-gather and reduce-scatter follow; the
// broadcast and reduce, chains host by host, end the file.
//
// Let L_h be the ranks of host h (in rank order), K = min over hosts of L_h,
// and the buffer cut into K parts. Local rank k (k < K) of every host owns
// part k, and the owners of part k, one per host, form rail k.
//
//   phase           primitive(s), per part k            on
//   1 reduce        chain into local rank k:            every host, all its ranks
//                   send · recvReduceSend · recvReduce
//   2 all-reduce    ring over rail k (ring.cc)          the K owners of each part
//   3 broadcast     chain from local rank k:            every host, all its ranks
//                   send · recvCopySend · recv
//
// Phase 1 leaves part k summed over the host on its owner, without fin();
// phase 2's ring completes it (fin() once, on one rank of the rail) and
// gives it to every owner; phase 3 hands it to the host's other ranks. The
// algorithm runs in place (input == output: the driver copies the input in
// first). Every rank walks the parts in the same order in each phase, and
// each chain and ring only waits on ranks doing the same step, so no order
// of arrival can deadlock (the schedule replay test checks it).
//
// Uneven hosts: K is the smallest host's rank count, so a host with more
// ranks has some that own no part; they only take part in phases 1 and 3.
// A host with one rank owns every part (K = 1 everywhere: one rail).
//
// Cost, S bytes per rank, H hosts, L ranks per host, with the link's α, β
// (the K rails share each host's link) and the host's α_l, β_l:
//   T = 2(H-1)·α + 2(H-1)/H·S·β + (H-1)/H·S·γ          across hosts
//     + 2·K·(L-1)·α_l + 2·S·β_l + S·γ                    inside hosts
// against the flat ring's 2(n-1)·α + 2(n-1)/n·S·β across the same link: the
// link carries 2(H-1)/H·S instead of 2(n-1)/n·S, 1.5x less on 2 hosts x 2
// (docs/performance.md derives it, and measures both on a capped link).
#include <algorithm>
#include <map>
#include <vector>

#include "algorithms/chain.h"
#include "algorithms/chunking.h"
#include "algorithms/collectives.h"
#include "algorithms/ring.h"

namespace coil::algo {
namespace {

struct Layout {
  std::vector<std::vector<int>> hosts;  // each host's ranks, ascending; hosts by lowest rank
  int myHost = 0;
  int myLocal = 0;                      // this rank's index on its host
  int parts = 1;                        // K
  int prev = 0, next = 0;               // this rank's neighbours on its host's ring

  /// The ranks of host h whose blocks rail k owns (all-gather, reduce-scatter):
  /// its local ranks i with i mod K == k, in rank order.
  std::vector<int> dealt(int h, int k) const {
    std::vector<int> ranks;
    for (int i = k; i < static_cast<int>(hosts[h].size()); i += parts) ranks.push_back(hosts[h][i]);
    return ranks;
  }
};

Layout layoutOf(const CallShape& s) {
  Layout l;
  std::map<int, int> indexOfHost;  // host id -> index in l.hosts
  for (int r = 0; r < s.nranks; ++r) {
    const int host = s.hostOf ? (*s.hostOf)[r] : 0;
    auto [it, fresh] = indexOfHost.try_emplace(host, static_cast<int>(l.hosts.size()));
    if (fresh) l.hosts.emplace_back();
    if (r == s.rank) {
      l.myHost = it->second;
      l.myLocal = static_cast<int>(l.hosts[it->second].size());
    }
    l.hosts[it->second].push_back(r);
  }
  l.parts = static_cast<int>(l.hosts[0].size());
  for (const auto& h : l.hosts) l.parts = std::min(l.parts, static_cast<int>(h.size()));
  const std::vector<int>& local = l.hosts[l.myHost];
  const int n = static_cast<int>(local.size());
  l.prev = local[mod(l.myLocal - 1, n)];
  l.next = local[mod(l.myLocal + 1, n)];
  return l;
}

// Element `base` of rank `rank`'s block (the gathers' buffers hold n blocks).
size_t blockAt(const CallShape& s, int rank, size_t base) {
  return static_cast<size_t>(rank) * s.count + base;
}

// step(base, len) for each chunk of a block, as the rings cut it, so that
// every step fits half a FIFO.
template <typename Step>
void forEachChunk(const CallShape& s, Step&& step) {
  for (size_t base = 0; base < s.count; base += s.chunkElems)
    step(base, std::min(s.chunkElems, s.count - base));
}

}  // namespace

void hierarchicalAllReduce(Primitives& p, const CallShape& s) {
  const Layout l = layoutOf(s);
  const std::vector<int>& local = l.hosts[l.myHost];
  const int n = static_cast<int>(local.size());
  const int me = l.myLocal;
  const int prev = l.prev, next = l.next;
  auto part = [&](int k) { return evenPart(0, s.count, l.parts, k); };

  // 1: each part summed over the host into its owner (no fin yet).
  if (n > 1)
    for (int k = 0; k < l.parts; ++k) {
      const Span sp = part(k);
      const int pos = mod(me - k - 1, n);  // the owner, local rank k, is last
      for (size_t o = sp.offset; o < sp.offset + sp.count; o += s.chunkElems) {
        const size_t c = std::min(s.chunkElems, sp.offset + sp.count - o);
        if (pos == 0) p.send(next, o, c);
        else if (pos == n - 1) p.recvReduce(prev, o, c);
        else p.recvReduceSend(prev, next, o, c);
      }
    }

  // 2: the owners of each part all-reduce it across hosts, one rail per part.
  if (me < l.parts) {
    std::vector<int> rail;
    for (const auto& h : l.hosts) rail.push_back(h[me]);
    const Span sp = part(me);
    ringAllReduceOver(p, &rail, static_cast<int>(rail.size()), l.myHost, sp.offset, sp.count,
                      s.chunkElems);
  }

  // 3: each owner hands its finished part to the rest of its host.
  if (n > 1)
    for (int k = 0; k < l.parts; ++k) {
      const Span sp = part(k);
      const int pos = mod(me - k, n);  // the owner is first
      for (size_t o = sp.offset; o < sp.offset + sp.count; o += s.chunkElems) {
        const size_t c = std::min(s.chunkElems, sp.offset + sp.count - o);
        if (pos == 0) p.send(next, o, c);
        else if (pos == n - 1) p.recv(prev, o, c);
        else p.recvCopySend(prev, next, o, c);
      }
    }
}

// Hierarchical all-gather (in place: block q of the output is rank q's;
// this rank's own block is already there). With L_h, K and the rails as
// above, host h's blocks are dealt to its first K ranks: local rank k owns
// the blocks of its host's local ranks i with i % K == k.
//
//   phase           primitive(s)                                on
//   1 all-gather    ring over the host's ranks:                 every host
//                   send · recvCopySend · recv (its own blocks)
//   2 all-gather    ring over rail k, each owner's dealt         the K owners of
//                   blocks: send · recvCopySend · recv           each rail
//   3 broadcast     chain from local rank k of the blocks it     every host
//                   received in 2: send · recvCopySend · recv
//
// Every block of another host crosses this host's link once (it arrives on
// one rail and is handed around inside): the link carries (H-1)/H·S where
// the flat ring's carries (n-1)/n·S, 1.5x less on 2 hosts x 2.
//   T = (H-1)·α + (H-1)/H·S·β  +  2·(L-1)·α_l + ~S·β_l
void hierarchicalAllGather(Primitives& p, const CallShape& s) {
  const Layout l = layoutOf(s);
  const std::vector<int>& local = l.hosts[l.myHost];
  const int n = static_cast<int>(local.size());
  const int me = l.myLocal;
  const int prev = l.prev, next = l.next;
  const int hosts = static_cast<int>(l.hosts.size());

  // 1: the host's blocks around the host's ring.
  if (n > 1)
    forEachChunk(s, [&](size_t base, size_t len) {
      p.send(next, blockAt(s, s.rank, base), len);
      for (int j = 1; j <= n - 2; ++j) p.recvCopySend(prev, next, blockAt(s, local[mod(me - j, n)], base), len);
      p.recv(prev, blockAt(s, local[mod(me + 1, n)], base), len);
    });

  // 2: each rail's owners pass their hosts' dealt blocks around the rail.
  if (me < l.parts && hosts > 1) {
    const int h = l.myHost;
    const int railPrev = l.hosts[mod(h - 1, hosts)][me], railNext = l.hosts[mod(h + 1, hosts)][me];
    forEachChunk(s, [&](size_t base, size_t len) {
      for (int q : l.dealt(h, me)) p.send(railNext, blockAt(s, q, base), len);
      for (int j = 1; j <= hosts - 2; ++j)
        for (int q : l.dealt(mod(h - j, hosts), me)) p.recvCopySend(railPrev, railNext, blockAt(s, q, base), len);
      for (int q : l.dealt(mod(h + 1, hosts), me)) p.recv(railPrev, blockAt(s, q, base), len);
    });
  }

  // 3: each owner hands the other hosts' blocks it received to its host.
  if (n > 1 && hosts > 1)
    for (int k = 0; k < l.parts; ++k) {
      const int pos = mod(me - k, n);  // the owner, local rank k, is first
      forEachChunk(s, [&](size_t base, size_t len) {
        for (int h = 0; h < hosts; ++h) {
          if (h == l.myHost) continue;
          for (int q : l.dealt(h, k)) {
            if (pos == 0) p.send(next, blockAt(s, q, base), len);
            else if (pos == n - 1) p.recv(prev, blockAt(s, q, base), len);
            else p.recvCopySend(prev, next, blockAt(s, q, base), len);
          }
        }
      });
    }
}

// Hierarchical reduce-scatter, in place on a scratch copy of the whole
// input (Layout::kScratch: the driver copies the n blocks in, and this
// rank's block out at the end). Block b, of local rank i on its host, is
// dealt to rail k = i mod K: the owners of rail k sum it.
//
//   phase           primitive(s)                                on
//   1 reduce        chain into local rank k of every block       every host
//                   dealt to rail k: send · recvReduceSend ·
//                   recvReduce (no fin yet)
//   2 reduce-       ring over rail k, each host's dealt blocks    the owners
//     scatter       as its segment: send · recvReduceSend ·
//                   recvReduceCopy (fin, once)
//   3 hand out      owner k sends each finished block to its      every host
//                   rank: send · recv
//
// Every element crosses this host's link at most once per ring step: the
// link carries (H-1)/H·S where the flat ring's carries (n-1)/n·S.
void hierarchicalReduceScatter(Primitives& p, const CallShape& s) {
  const Layout l = layoutOf(s);
  const std::vector<int>& local = l.hosts[l.myHost];
  const int n = static_cast<int>(local.size());
  const int me = l.myLocal;
  const int prev = l.prev, next = l.next;
  const int hosts = static_cast<int>(l.hosts.size());
  // With one host the chain of phase 1 finishes the blocks (fin); with one
  // rank there is nothing to add: its own block is finished by a copy.
  const bool chainFinishes = hosts == 1;
  if (s.nranks == 1) {
    p.copy(blockAt(s, s.rank, 0), blockAt(s, s.rank, 0), s.count);
    return;
  }

  // 1: every block of rail k summed over the host into local rank k.
  if (n > 1)
    for (int k = 0; k < l.parts; ++k) {
      const int pos = mod(me - k - 1, n);  // the owner, local rank k, is last
      forEachChunk(s, [&](size_t base, size_t len) {
        for (int h = 0; h < hosts; ++h)
          for (int q : l.dealt(h, k)) {
            const size_t o = blockAt(s, q, base);
            if (pos == 0) p.send(next, o, len);
            else if (pos < n - 1) p.recvReduceSend(prev, next, o, len);
            else if (chainFinishes) p.recvReduceCopy(prev, o, len);
            else p.recvReduce(prev, o, len);
          }
      });
    }

  // 2: the owners of rail k reduce-scatter across hosts, host h's dealt
  // blocks being its segment: each completes (fin) at its own host's owner.
  if (me < l.parts && hosts > 1) {
    const int h = l.myHost;
    const int railPrev = l.hosts[mod(h - 1, hosts)][me], railNext = l.hosts[mod(h + 1, hosts)][me];
    forEachChunk(s, [&](size_t base, size_t len) {
      for (int q : l.dealt(mod(h - 1, hosts), me)) p.send(railNext, blockAt(s, q, base), len);
      for (int j = 1; j <= hosts - 2; ++j)
        for (int q : l.dealt(mod(h - 1 - j, hosts), me))
          p.recvReduceSend(railPrev, railNext, blockAt(s, q, base), len);
      for (int q : l.dealt(h, me)) p.recvReduceCopy(railPrev, blockAt(s, q, base), len);
    });
  }

  // 3: each owner hands the finished blocks of its host's ranks to them.
  if (n > 1) {
    const int owner = local[me % l.parts];
    if (me < l.parts) {
      for (int q : l.dealt(l.myHost, me))
        if (q != s.rank) forEachChunk(s, [&](size_t base, size_t len) { p.send(q, blockAt(s, q, base), len); });
    } else {
      forEachChunk(s, [&](size_t base, size_t len) { p.recv(owner, blockAt(s, s.rank, base), len); });
    }
  }
}

// Hierarchical broadcast and reduce: the pipelined chains of
// ring_family.cc, over the ranks host by host instead of in rank order.
//
//   order: the root, the other ranks of its host, then each other host's
//          ranks (hosts in their order after the root's, wrapping), every
//          host's in rank order
//   broadcast  the chain from the root along the order
//   reduce     the chain along the reversed order, into the root
//
// Each link between two hosts then carries the data once, H - 1 hops of
// the chain cross hosts and n - H stay inside one. In rank order a chain
// crosses a host boundary wherever consecutive ranks sit on different
// hosts: n - 1 times for ranks dealt to hosts in turn (mpirun --map-by
// node, Slurm's cyclic distribution), and the link between two hosts then
// carries the data once per crossing, both ways. With ranks numbered host
// by host and the root first on its host, the two orders are one chain.
// Cost, S bytes in chunks of C (k of them), the link's α, β and the
// host's α_l, β_l (γ: reduce):
//   T = (H-1)·(α + C·β) + (n-H)·(α_l + C·β_l) + (k-1)·(α + C·β)
// against the rank-order chain's (n-1+k-1)·(α + C·β) when every hop
// crosses.

namespace {

// The hosts' ranks in chain order from the root (see above).
std::vector<int> hostOrderFrom(const Layout& l, int root) {
  int rootHost = 0;
  for (int h = 0; h < static_cast<int>(l.hosts.size()); ++h)
    for (int r : l.hosts[h])
      if (r == root) rootHost = h;
  std::vector<int> order = {root};
  const int hosts = static_cast<int>(l.hosts.size());
  for (int i = 0; i < hosts; ++i)
    for (int r : l.hosts[(rootHost + i) % hosts])
      if (r != root) order.push_back(r);
  return order;
}

int positionOf(const std::vector<int>& order, int rank) {
  return static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
}

}  // namespace

void hierarchicalBroadcast(Primitives& p, const CallShape& s) {
  if (s.rank == s.root) p.copy(0, 0, s.count);  // root: output gets the data too
  if (s.nranks == 1) return;
  const std::vector<int> order = hostOrderFrom(layoutOf(s), s.root);
  const int n = s.nranks, pos = positionOf(order, s.rank);
  chainBroadcastAt(p, s, pos, order[mod(pos - 1, n)], order[mod(pos + 1, n)]);
}

void hierarchicalReduce(Primitives& p, const CallShape& s) {
  if (s.nranks == 1) {
    p.copy(0, 0, s.count);
    return;
  }
  std::vector<int> order = hostOrderFrom(layoutOf(s), s.root);
  std::reverse(order.begin(), order.end());  // ends at the root
  const int n = s.nranks, pos = positionOf(order, s.rank);
  chainReduceAt(p, s, pos, order[mod(pos - 1, n)], order[mod(pos + 1, n)]);
}

}  // namespace coil::algo
