// A CollectiveCase (collective_reference.h) called through the C API
// (coilAllReduce, coilBroadcast, ...); a header, so that tests that run the
// reference without linking the library can still use the reference.
#pragma once

#include "coil.h"
#include "harness/collective_reference.h"

namespace coil::test {

inline coilResult_t callCollective(const CollectiveCase& c, const PlacedCall& b,
                                   coilComm_t comm, coilStream_t stream) {
  switch (c.kind) {
    case algo::CollKind::AllReduce:
      return coilAllReduce(b.send, b.recv, c.count, c.type, c.op, comm, stream);
    case algo::CollKind::Broadcast:
      return coilBroadcast(b.send, b.recv, c.count, c.type, c.root, comm, stream);
    case algo::CollKind::Reduce:
      return coilReduce(b.send, b.recv, c.count, c.type, c.op, c.root, comm, stream);
    case algo::CollKind::AllGather:
      return coilAllGather(b.send, b.recv, c.count, c.type, comm, stream);
    case algo::CollKind::ReduceScatter:
      return coilReduceScatter(b.send, b.recv, c.count, c.type, c.op, comm, stream);
    case algo::CollKind::AllToAll:
      return coilAlltoAll(b.send, b.recv, c.count, c.type, comm, stream);
    case algo::CollKind::Gather:
      return coilGather(b.send, b.recv, c.count, c.type, c.root, comm, stream);
    case algo::CollKind::Scatter:
      return coilScatter(b.send, b.recv, c.count, c.type, c.root, comm, stream);
    default: return coilInvalidArgument;
  }
}

}  // namespace coil::test
