// The collectives coil_perf measures, and how each is sized and scored,
// following nccl-tests' conventions:
//
//  - the "size" column is the total bytes S of the operation. For the
//    collectives that split a buffer into per-rank blocks (all-gather,
//    reduce-scatter, all-to-all, gather, scatter) S = block * n * typesize,
//    so a requested size is rounded down to a multiple of n elements; for
//    the others S is the buffer every rank passes (count * typesize).
//  - algbw = S / time; busbw = algbw * factor, where the factor is the
//    fraction of S that crosses the busiest link in the best algorithm, so
//    busbw compares with the link's bandwidth whatever n is:
//      allreduce                           2(n-1)/n  (reduce-scatter + all-gather)
//      allgather, reducescatter, alltoall  (n-1)/n   (each rank receives/sends all blocks but its own)
//      gather, scatter                     (n-1)/n   (the root's link carries n-1 of n blocks)
//      broadcast, reduce, sendrecv         1         (the whole buffer crosses a link once)
//  - in-place forms (where the collective has one): allreduce, broadcast and
//    reduce use send == recv; allgather sendbuff = recvbuff + rank*block;
//    reducescatter recvbuff = sendbuff + rank*block. All-to-all, gather,
//    scatter and sendrecv are measured out-of-place only.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "coil.h"
#include "dtypes.h"

namespace coil_perf {

enum class Collective {
  AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Gather, Scatter, SendRecv
};

struct CollectiveInfo {
  Collective id;
  const char* name;  ///< accepted by -C, printed in tables and JSON
  bool reduces;      ///< takes a reduction operator (-o)
  bool rooted;       ///< takes a root (-r)
  bool inPlace;      ///< has an in-place form
  bool blocked;      ///< S is n blocks of `count` elements (count is per rank)
};

/// Every collective, in the order `-C all` runs them.
const std::vector<CollectiveInfo>& allCollectives();

/// "all" or a comma list ("allreduce,broadcast"). Throws UsageError listing
/// the accepted names if one is unknown.
std::vector<CollectiveInfo> parseCollectives(const std::string& names);

/// The table entry of `c`.
const CollectiveInfo& collectiveInfo(Collective c);

/// busbw / algbw for `c` with `nranks` ranks (see the file comment).
double busFactor(Collective c, int nranks);

/// The buffers of one call of `c` sized from a requested S.
struct Layout {
  size_t count = 0;       ///< the call's count argument (per-rank block when `blocked`)
  size_t sendCount = 0;   ///< elements of sendbuff the call reads on a sending rank
  size_t recvCount = 0;   ///< elements of recvbuff it writes on a receiving rank
  size_t totalCount = 0;  ///< elements of the whole operation: the "count" column
  size_t bytes = 0;       ///< totalCount * typeSize: the "size" column
};

/// The layout of `c` for a requested size of `bytes` (rounded down to whole
/// elements, and to a multiple of `nranks` elements for blocked collectives).
Layout layoutFor(Collective c, size_t bytes, size_t typeSize, int nranks);

/// One call, as coil, MPI and the checker see it.
struct CollCall {
  Collective coll = Collective::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  ///< Layout::count
  TypeInfo type{};
  coilRedOp_t op = coilSum;  ///< ignored by collectives that do not reduce
  int root = 0;              ///< ignored by collectives without a root
};

/// For an in-place call on `buffer` (which holds max(sendCount, recvCount)
/// elements): the send and receive pointers nccl-tests defines. `c` must
/// have an in-place form.
void inPlacePointers(Collective c, void* buffer, const Layout& layout, size_t typeSize, int rank,
                     const void** send, void** recv);

}  // namespace coil_perf
