#include "collectives.h"

#include <stdexcept>

#include "units.h"

namespace coil_perf {

const std::vector<CollectiveInfo>& allCollectives() {
  //                       id                          name            reduces rooted inPlace blocked
  static const std::vector<CollectiveInfo> kCollectives = {
      {Collective::AllReduce, "allreduce", true, false, true, false},
      {Collective::Broadcast, "broadcast", false, true, true, false},
      {Collective::Reduce, "reduce", true, true, true, false},
      {Collective::AllGather, "allgather", false, false, true, true},
      {Collective::ReduceScatter, "reducescatter", true, false, true, true},
      {Collective::AllToAll, "alltoall", false, false, false, true},
      {Collective::Gather, "gather", false, true, false, true},
      {Collective::Scatter, "scatter", false, true, false, true},
      {Collective::SendRecv, "sendrecv", false, false, false, false},
  };
  return kCollectives;
}

std::vector<CollectiveInfo> parseCollectives(const std::string& names) {
  if (names == "all") return allCollectives();
  std::vector<CollectiveInfo> out;
  for (const std::string& name : splitCommas(names)) {
    bool found = false;
    for (const CollectiveInfo& c : allCollectives()) {
      if (name == c.name) {
        out.push_back(c);
        found = true;
      }
    }
    if (!found) {
      std::string known;
      for (const CollectiveInfo& c : allCollectives()) known += std::string(c.name) + ", ";
      throw UsageError("-C: unknown collective '" + name + "' (one of " + known + "all)");
    }
  }
  return out;
}

const CollectiveInfo& collectiveInfo(Collective c) {
  for (const CollectiveInfo& info : allCollectives()) {
    if (info.id == c) return info;
  }
  throw std::logic_error("collectiveInfo: collective not in the table");
}

double busFactor(Collective c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Collective::AllReduce: return nranks > 1 ? 2.0 * (n - 1) / n : 0.0;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::Gather:
    case Collective::Scatter: return (n - 1) / n;
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::SendRecv: return 1.0;
  }
  return 0.0;
}

Layout layoutFor(Collective c, size_t bytes, size_t typeSize, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  Layout l;
  if (!collectiveInfo(c).blocked) {
    l.count = l.sendCount = l.recvCount = l.totalCount = bytes / typeSize;
  } else {
    l.count = bytes / typeSize / n;
    l.totalCount = l.count * n;
    // What a rank reads and writes; for gather and scatter the root's side
    // is the full buffer (other ranks use only their block of it).
    switch (c) {
      case Collective::AllGather:
      case Collective::Gather: l.sendCount = l.count; l.recvCount = l.totalCount; break;
      case Collective::ReduceScatter:
      case Collective::Scatter: l.sendCount = l.totalCount; l.recvCount = l.count; break;
      default: l.sendCount = l.recvCount = l.totalCount; break;  // all-to-all
    }
  }
  l.bytes = l.totalCount * typeSize;
  return l;
}

void inPlacePointers(Collective c, void* buffer, const Layout& layout, size_t typeSize, int rank,
                     const void** send, void** recv) {
  char* base = static_cast<char*>(buffer);
  const size_t ownBlock = static_cast<size_t>(rank) * layout.count * typeSize;
  switch (c) {
    case Collective::AllGather: *recv = base; *send = base + ownBlock; return;
    case Collective::ReduceScatter: *send = base; *recv = base + ownBlock; return;
    case Collective::AllReduce:
    case Collective::Broadcast:
    case Collective::Reduce: *send = base; *recv = base; return;
    default: break;
  }
  throw std::logic_error(std::string("inPlacePointers: ") + collectiveInfo(c).name +
                         " has no in-place form");
}

}  // namespace coil_perf
