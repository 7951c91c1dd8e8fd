#include "expect.h"

namespace coil_perf {
namespace {

bool sendsData(const CollCall& call, int rank) {
  switch (call.coll) {
    case Collective::Broadcast:
    case Collective::Scatter: return rank == call.root;
    default: return true;
  }
}

const char* block(const void* base, size_t index, size_t elements, const TypeInfo& type) {
  return static_cast<const char*>(base) + index * elements * type.size;
}

}  // namespace

bool receivesResult(const CollCall& call, int rank) {
  switch (call.coll) {
    case Collective::Reduce:
    case Collective::Gather: return rank == call.root;
    default: return true;
  }
}

void fillCollectiveInput(const CollCall& call, const Layout& layout, int rank, int nranks) {
  if (!sendsData(call, rank)) return;
  void* send = const_cast<void*>(call.send);  // the benchmark owns the buffer
  if (collectiveInfo(call.coll).reduces) {
    fillInput(send, layout.sendCount, call.type, call.op, rank, nranks);
  } else {
    fillCopyInput(send, layout.sendCount, call.type, rank, 0);
  }
}

void poisonCollectiveOutput(const CollCall& call, const Layout& layout, int rank) {
  if (receivesResult(call, rank)) poison(call.recv, layout.recvCount, call.type);
}

WrongReport checkCollectiveOutput(const CollCall& call, const Layout& layout, int rank,
                                  int nranks) {
  WrongReport report;
  if (!receivesResult(call, rank)) return report;
  const TypeInfo& t = call.type;
  const size_t b = layout.count;
  const size_t ownOffset = static_cast<size_t>(rank) * b;
  switch (call.coll) {
    case Collective::AllReduce:
    case Collective::Reduce: return countWrong(call.recv, layout.recvCount, t, call.op, nranks);
    case Collective::ReduceScatter:
      return countWrong(call.recv, layout.recvCount, t, call.op, nranks, ownOffset);
    case Collective::Broadcast: return countWrongCopy(call.recv, layout.recvCount, t, call.root, 0);
    case Collective::Scatter:
      return countWrongCopy(call.recv, layout.recvCount, t, call.root, ownOffset);
    case Collective::SendRecv:
      return countWrongCopy(call.recv, layout.recvCount, t, (rank - 1 + nranks) % nranks, 0);
    case Collective::AllGather:
    case Collective::Gather:
    case Collective::AllToAll:
      // Block q comes from rank q: its own data (gathers), or the part of
      // its send buffer addressed to this rank (all-to-all).
      for (int q = 0; q < nranks; ++q) {
        const size_t sourceOffset = call.coll == Collective::AllToAll ? ownOffset : 0;
        const size_t base = static_cast<size_t>(q) * b;
        mergeWrong(report, countWrongCopy(block(call.recv, q, b, t), b, t, q, sourceOffset), base);
      }
      return report;
  }
  return report;
}

}  // namespace coil_perf
