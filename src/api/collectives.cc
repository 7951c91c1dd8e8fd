// Exported collectives: argument validation, then the communicator.
#include "api/device_calls.h"
#include "api/group.h"
#include "api/guard.h"
#include "reduce/reduce.h"

#include <optional>
#include <string>

using coil::api::guarded;

namespace coil::api {
namespace {

/// Checks what every collective with a send and a receive buffer needs
/// (pass nullptr, 0 for a buffer an in-place call makes part of the other).
void checkBuffers(const void* sendbuff, size_t sendBytes, const void* recvbuff, size_t recvBytes) {
  if (sendBytes > 0 && sendbuff == nullptr) fail(coilInvalidArgument, "sendbuff is NULL");
  if (recvBytes > 0 && recvbuff == nullptr) fail(coilInvalidArgument, "recvbuff is NULL");
  if (sendbuff == recvbuff || sendBytes == 0 || recvBytes == 0) return;  // in-place is fine
  auto s = reinterpret_cast<uintptr_t>(sendbuff);
  auto r = reinterpret_cast<uintptr_t>(recvbuff);
  if (s < r + recvBytes && r < s + sendBytes)
    fail(coilInvalidArgument, "sendbuff and recvbuff overlap partially (", sendbuff, " + ",
         sendBytes, " bytes vs ", recvbuff, " + ", recvBytes,
         " bytes); pass the same pointer for in-place");
}

/// count × blocks × the type's size, or coilInvalidArgument when the
/// product does not fit in size_t (blocks: 1, or the rank count for the
/// collectives whose buffer holds one block per rank).
size_t checkedBytes(size_t count, coilDataType_t type, size_t blocks = 1) {
  size_t elements = 0, bytes = 0;
  if (__builtin_mul_overflow(count, blocks, &elements) ||
      __builtin_mul_overflow(elements, reduce::typeSize(type), &bytes))
    fail(coilInvalidArgument, "count ", count, blocks > 1 ? " x " : "",
         blocks > 1 ? std::to_string(blocks) + " ranks" : std::string(), " of ",
         reduce::typeName(type), " overflows size_t bytes");
  return bytes;
}

void checkType(int type) {
  if (!reduce::validType(type)) fail(coilInvalidArgument, "invalid datatype ", type);
}

void checkOp(const Communicator& c, int op, coilDataType_t type) {
  if (!c.validOp(op, type))
    fail(coilInvalidArgument, "invalid reduction op ", op,
         op >= coilNumOps ? " (not a pre-multiplied sum of this communicator and datatype)" : "");
  if (reduce::validOp(op)) reduce::checkTakesType(static_cast<coilRedOp_t>(op), type, nullptr);
}

void checkRoot(const Communicator& c, int root) {
  if (root < 0 || root >= c.nranks())
    fail(coilInvalidArgument, "root ", root, " is out of range [0, ", c.nranks(), ")");
}

void checkPeer(const Communicator& c, int peer) {
  if (peer < 0 || peer >= c.nranks())
    fail(coilInvalidArgument, "peer ", peer, " is out of range [0, ", c.nranks(), ")");
}

// Runs now (host buffers), enqueues on the stream (device buffers), or
// queues when inside coilGroupStart/End. `use`: the bytes the call reads
// and writes on this rank.
void issue(coilComm* comm, const CollectiveCall& call, const CallBuffers& use,
           coilStream_t stream, const char* function) {
  const bool device = onDevice(use, stream);
  if (inGroup()) {
    enqueueCollective(comm, call, use, device, stream);
    return;
  }
  if (device && copiesOnOneRank(comm, call, use)) return enqueueOneRankCopy(comm, use, stream);
  if (device)
    if (const std::optional<RegisteredCall> windows = registeredCallOf(comm, call, use))
      return enqueueRegisteredCall(comm, call, *windows, stream, function);
  if (device && runsOnPeerWindows(comm, call)) return enqueuePeerCall(comm, call, stream, function);
  runOrEnqueue(comm, device, rangesOf(use, device), stream, function,
               [call](Communicator& host, const HostOf& of) { host.collective(hostCall(call, of)); });
}

}  // namespace
}  // namespace coil::api

using namespace coil;

extern "C" coilResult_t coilAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                      coilDataType_t datatype, coilRedOp_t op, coilComm_t comm,
                                      coilStream_t stream) {
  return guarded("coilAllReduce", comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    api::checkType(datatype);
    api::checkOp(c, op, datatype);
    size_t bytes = api::checkedBytes(count, datatype);
    api::checkBuffers(sendbuff, bytes, recvbuff, bytes);
    api::issue(comm, {algo::CollKind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0},
               {sendbuff, bytes, recvbuff, bytes}, stream, "coilAllReduce");
  });
}

// coilBroadcast and coilBcast, under the name the caller used.
static coilResult_t broadcastAs(const char* function, const void* sendbuff, void* recvbuff,
                                size_t count, coilDataType_t datatype, int root, coilComm_t comm,
                                coilStream_t stream) {
  return guarded(function, comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    api::checkType(datatype);
    api::checkRoot(c, root);
    size_t bytes = api::checkedBytes(count, datatype);
    const size_t sendBytes = c.rank() == root ? bytes : 0;
    api::checkBuffers(c.rank() == root ? sendbuff : nullptr, sendBytes, recvbuff, bytes);
    api::issue(comm, {algo::CollKind::Broadcast, sendbuff, recvbuff, count, datatype, coilSum, root},
               {sendbuff, sendBytes, recvbuff, bytes}, stream, function);
  });
}

extern "C" coilResult_t coilBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                      coilDataType_t datatype, int root, coilComm_t comm,
                                      coilStream_t stream) {
  return broadcastAs("coilBroadcast", sendbuff, recvbuff, count, datatype, root, comm, stream);
}

extern "C" coilResult_t coilBcast(void* buff, size_t count, coilDataType_t datatype, int root,
                                  coilComm_t comm, coilStream_t stream) {
  return broadcastAs("coilBcast", buff, buff, count, datatype, root, comm, stream);
}

extern "C" coilResult_t coilReduce(const void* sendbuff, void* recvbuff, size_t count,
                                   coilDataType_t datatype, coilRedOp_t op, int root,
                                   coilComm_t comm, coilStream_t stream) {
  return guarded("coilReduce", comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    api::checkType(datatype);
    api::checkOp(c, op, datatype);
    api::checkRoot(c, root);
    size_t bytes = api::checkedBytes(count, datatype);
    const size_t recvBytes = c.rank() == root ? bytes : 0;
    api::checkBuffers(sendbuff, bytes, c.rank() == root ? recvbuff : nullptr, recvBytes);
    api::issue(comm, {algo::CollKind::Reduce, sendbuff, recvbuff, count, datatype, op, root},
               {sendbuff, bytes, recvbuff, recvBytes}, stream, "coilReduce");
  });
}

extern "C" coilResult_t coilAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                      coilDataType_t datatype, coilComm_t comm,
                                      coilStream_t stream) {
  return guarded("coilAllGather", comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    api::checkType(datatype);
    size_t bytes = api::checkedBytes(sendcount, datatype);
    size_t total = api::checkedBytes(sendcount, datatype, static_cast<size_t>(c.nranks()));
    // In-place is sendbuff == recvbuff + rank * sendcount: a partial overlap
    // that is allowed, so compare against this rank's own block.
    const uint8_t* mine = static_cast<uint8_t*>(recvbuff) + static_cast<size_t>(c.rank()) * bytes;
    if (sendbuff != mine) api::checkBuffers(sendbuff, bytes, recvbuff, total);
    else api::checkBuffers(nullptr, 0, recvbuff, total);
    api::issue(comm, {algo::CollKind::AllGather, sendbuff, recvbuff, sendcount, datatype, coilSum, 0},
               {sendbuff, bytes, recvbuff, total}, stream, "coilAllGather");
  });
}

extern "C" coilResult_t coilReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                          coilDataType_t datatype, coilRedOp_t op,
                                          coilComm_t comm, coilStream_t stream) {
  return guarded("coilReduceScatter", comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    api::checkType(datatype);
    api::checkOp(c, op, datatype);
    size_t bytes = api::checkedBytes(recvcount, datatype);
    size_t total = api::checkedBytes(recvcount, datatype, static_cast<size_t>(c.nranks()));
    const uint8_t* mine = static_cast<const uint8_t*>(sendbuff) + static_cast<size_t>(c.rank()) * bytes;
    if (recvbuff != mine) api::checkBuffers(sendbuff, total, recvbuff, bytes);
    else api::checkBuffers(sendbuff, total, nullptr, 0);
    api::issue(comm, {algo::CollKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0},
               {sendbuff, total, recvbuff, bytes}, stream, "coilReduceScatter");
  });
}

extern "C" coilResult_t coilAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                     coilDataType_t datatype, coilComm_t comm,
                                     coilStream_t stream) {
  return guarded("coilAlltoAll", comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    api::checkType(datatype);
    size_t total = api::checkedBytes(count, datatype, static_cast<size_t>(c.nranks()));
    if (total > 0 && sendbuff == recvbuff)
      fail(coilInvalidArgument, "all-to-all cannot run in place (sendbuff == recvbuff)");
    api::checkBuffers(sendbuff, total, recvbuff, total);
    api::issue(comm, {algo::CollKind::AllToAll, sendbuff, recvbuff, count, datatype, coilSum, 0},
               {sendbuff, total, recvbuff, total}, stream, "coilAlltoAll");
  });
}

extern "C" coilResult_t coilGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                   coilDataType_t datatype, int root, coilComm_t comm,
                                   coilStream_t stream) {
  return guarded("coilGather", comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    api::checkType(datatype);
    api::checkRoot(c, root);
    size_t bytes = api::checkedBytes(sendcount, datatype);
    size_t total = api::checkedBytes(sendcount, datatype, static_cast<size_t>(c.nranks()));
    if (c.rank() != root) api::checkBuffers(sendbuff, bytes, nullptr, 0);
    else if (sendbuff == static_cast<uint8_t*>(recvbuff) + static_cast<size_t>(root) * bytes)
      api::checkBuffers(nullptr, 0, recvbuff, total);
    else api::checkBuffers(sendbuff, bytes, recvbuff, total);
    api::issue(comm, {algo::CollKind::Gather, sendbuff, recvbuff, sendcount, datatype, coilSum, root},
               {sendbuff, bytes, recvbuff, c.rank() == root ? total : 0}, stream, "coilGather");
  });
}

extern "C" coilResult_t coilScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                    coilDataType_t datatype, int root, coilComm_t comm,
                                    coilStream_t stream) {
  return guarded("coilScatter", comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    api::checkType(datatype);
    api::checkRoot(c, root);
    size_t bytes = api::checkedBytes(recvcount, datatype);
    size_t total = api::checkedBytes(recvcount, datatype, static_cast<size_t>(c.nranks()));
    if (c.rank() != root) api::checkBuffers(nullptr, 0, recvbuff, bytes);
    else if (recvbuff == static_cast<const uint8_t*>(sendbuff) + static_cast<size_t>(root) * bytes)
      api::checkBuffers(sendbuff, total, nullptr, 0);
    else api::checkBuffers(sendbuff, total, recvbuff, bytes);
    api::issue(comm, {algo::CollKind::Scatter, sendbuff, recvbuff, recvcount, datatype, coilSum, root},
               {sendbuff, c.rank() == root ? total : 0, recvbuff, bytes}, stream, "coilScatter");
  });
}

static coilResult_t pointToPoint(const char* fn, bool isSend, const void* buf, size_t count,
                                 coilDataType_t datatype, int peer, coilComm_t comm,
                                 coilStream_t stream) {
  return guarded(fn, comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    api::checkType(datatype);
    api::checkPeer(c, peer);
    size_t bytes = api::checkedBytes(count, datatype);
    const api::CallBuffers use = isSend ? api::CallBuffers{buf, bytes, nullptr, 0}
                                        : api::CallBuffers{nullptr, 0, buf, bytes};
    api::checkBuffers(use.send, use.sendBytes, use.recv, use.recvBytes);
    const bool device = api::onDevice(use, stream);
    P2pCall call{isSend, const_cast<void*>(buf), count, datatype, peer};
    if (api::inGroup()) {
      api::enqueueP2p(comm, call, use, device, stream);
    } else if (peer == c.rank()) {
      fail(coilInvalidUsage, "a send to or receive from this rank itself must be inside "
                             "coilGroupStart/coilGroupEnd together with its match");
    } else {
      api::runOrEnqueue(comm, device, api::rangesOf(use, device), stream, fn,
                        [call](Communicator& host, const api::HostOf& of) {
                          host.pointToPoint({api::hostCall(call, of)});
                        });
    }
  });
}

extern "C" coilResult_t coilSend(const void* sendbuff, size_t count, coilDataType_t datatype,
                                 int peer, coilComm_t comm, coilStream_t stream) {
  return pointToPoint("coilSend", true, sendbuff, count, datatype, peer, comm, stream);
}

extern "C" coilResult_t coilRecv(void* recvbuff, size_t count, coilDataType_t datatype, int peer,
                                 coilComm_t comm, coilStream_t stream) {
  return pointToPoint("coilRecv", false, recvbuff, count, datatype, peer, comm, stream);
}

extern "C" coilResult_t coilBarrier(coilComm_t comm, coilStream_t stream) {
  return guarded("coilBarrier", comm, [&] {
    api::InFlight busy(comm);
    api::usable(comm);
    if (api::inGroup()) fail(coilInvalidUsage, "coilBarrier cannot be called inside a group");
    // With a stream: in the stream's order, as the calls on device buffers.
    api::runOrEnqueue(comm, stream != nullptr, {}, stream, "coilBarrier",
                      [](Communicator& host, const api::HostOf&) { host.barrier(); });
  });
}

extern "C" coilResult_t coilRedOpCreatePreMulSum(coilRedOp_t* op, void* scalar,
                                                 coilDataType_t datatype,
                                                 coilScalarResidence_t residence,
                                                 coilComm_t comm) {
  return guarded("coilRedOpCreatePreMulSum", comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    if (op == nullptr) fail(coilInvalidArgument, "op is NULL");
    if (scalar == nullptr) fail(coilInvalidArgument, "scalar is NULL");
    api::checkType(datatype);
    if (residence != coilScalarDevice && residence != coilScalarHostImmediate)
      fail(coilInvalidArgument, "invalid scalar residence ", static_cast<int>(residence));
    *op = c.createPreMulSum(scalar, datatype, residence == coilScalarHostImmediate);
  });
}

extern "C" coilResult_t coilRedOpDestroy(coilRedOp_t op, coilComm_t comm) {
  return guarded("coilRedOpDestroy", comm, [&] {
    api::InFlight busy(comm);
    // NCCL lets an op be destroyed once the calls that use it are enqueued;
    // the staged bodies on streams resolve it when they run, so they go first.
    api::drainStaged(comm);
    api::usable(comm).destroyOp(op);
  });
}
