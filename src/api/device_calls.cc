#include "api/device_calls.h"

#include <array>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "api/guard.h"
#include "algorithms/device_window_p2p.h"
#include "algorithms/registered_collectives.h"
#include "core/env.h"
#include "core/log.h"
#include "device/device.h"
#include "device/device_reduce.h"
#include "reduce/reduce.h"

namespace coil::api {
namespace {

const char* kindName(device::MemKind kind) {
  return kind == device::MemKind::kDevice ? "device" : "host";
}

device::StagedStream& stagedStreamOf(coilComm* comm) {
  if (!comm->staged)
    fail(coilInvalidUsage, "a call on a stream needs a CUDA device, and none was current when "
                           "this communicator was created (", device::unavailableReason(), ")");
  return *comm->staged;
}

}  // namespace

void attachDevice(coilComm* comm) {
  if (!device::available()) return;
  comm->device = device::currentDevice();
  try {
    device::loadReductionKernels();  // on this device, before any call can wait (device_reduce.h)
  } catch (const Error& e) {
    // A GPU that libcoil has no kernels for (an architecture outside
    // -Dgpu_arch, no PTX that fits): host calls still work, device
    // reductions fail when called, naming the same error.
    COIL_WARN(kInit, "rank ", comm->rank, ": coil's reduction kernels do not load on CUDA device ",
              comm->device, ": ", e.what());
  }
  // Pinned staging, made now: allocating it later could wait on a stream
  // that waits on this communicator (staged_stream.h).
  const auto stagingBytes = static_cast<size_t>(
      env::getInt("COIL_STAGING_BYTES", 0, int64_t{1} << 40)
          .value_or(static_cast<int64_t>(device::StagedStream::kDefaultStagingBytes)));
  comm->staged = std::make_unique<device::StagedStream>(
      comm->device,
      [comm](const Error& e) {
        coilResult_t none = coilSuccess;
        comm->deviceError.compare_exchange_strong(none, e.code());
        recordError(comm, e.what());
      },
      stagingBytes);
  const std::optional<std::string> order = env::get("COIL_DEVICE_ORDER");
  if (order == "stream") comm->forcedOrder = device::StagedStream::Order::kStream;
  if (order == "host") comm->forcedOrder = device::StagedStream::Order::kHost;
}

bool onDevice(const CallBuffers& b, coilStream_t stream) {
  const void* buffers[2] = {b.sendBytes > 0 ? b.send : nullptr, b.recvBytes > 0 ? b.recv : nullptr};
  const char* names[2] = {"sendbuff", "recvbuff"};
  int first = -1;
  device::MemKind kind = device::MemKind::kHost;
  for (int i = 0; i < 2; ++i) {
    if (buffers[i] == nullptr) continue;
    const device::MemKind k = device::kindOf(buffers[i]);
    if (first >= 0 && k != kind)
      fail(coilInvalidArgument, names[first], " is ", kindName(kind), " memory but ", names[i],
           " is ", kindName(k), " memory; a call's buffers must all be one or the other");
    first = i;
    kind = k;
  }
  if (kind == device::MemKind::kDevice) return true;
  // A call that moves no bytes (count 0) goes where its stream says.
  if (first < 0 && stream != nullptr && device::available()) return true;
  if (stream != nullptr)
    fail(coilInvalidArgument, "stream must be NULL for host buffers (a call on host memory "
                              "completes before it returns; device buffers go on streams)");
  return false;
}

void addRanges(const CallBuffers& b, std::vector<device::DeviceRange>* ranges) {
  if (b.sendBytes > 0) ranges->push_back({b.send, b.sendBytes, true, false});
  if (b.recvBytes > 0) ranges->push_back({b.recv, b.recvBytes, false, true});
}

CollectiveCall hostCall(const CollectiveCall& call, const device::StagedStream::HostOf& hostOf) {
  CollectiveCall h = call;
  h.sendbuff = call.sendbuff ? hostOf(call.sendbuff) : nullptr;
  h.recvbuff = call.recvbuff ? hostOf(call.recvbuff) : nullptr;
  return h;
}

P2pCall hostCall(const P2pCall& call, const device::StagedStream::HostOf& hostOf) {
  P2pCall h = call;
  h.buffer = call.buffer ? hostOf(call.buffer) : nullptr;
  return h;
}

std::vector<device::DeviceRange> rangesOf(const CallBuffers& buffers, bool device) {
  std::vector<device::DeviceRange> ranges;
  if (device) addRanges(buffers, &ranges);
  return ranges;
}

Communicator& readyForHostCall(coilComm* comm) {
  drainStaged(comm);
  return usable(comm);
}

namespace {
const HostOf kSameBuffers = [](const void* p) { return const_cast<void*>(p); };
}  // namespace

const HostOf& hostBuffersAsTheyAre() { return kSameBuffers; }

namespace {

// Host order where another rank of this process calls on the same GPU
// (staged_stream.h says why), stream order otherwise. COIL_DEVICE_ORDER=
// stream or host overrides it, to measure one against the other (stream
// order for such ranks can deadlock).
device::StagedStream::Order orderOf(const coilComm* comm, const Communicator& c) {
  if (comm->forcedOrder) return *comm->forcedOrder;
  return c.sharesGpuInProcess() ? device::StagedStream::Order::kHost
                                : device::StagedStream::Order::kStream;
}

}  // namespace

void enqueueOnStream(coilComm* comm, const std::vector<device::DeviceRange>& ranges,
                     coilStream_t stream, const char* what, CallWork work) {
  std::string name = what;
  const auto order = orderOf(comm, usable(comm));
  stagedStreamOf(comm).enqueue(
      ranges,
      [comm, name, work = std::move(work)](const HostOf& hostOf) {
        try {
          work(usable(comm), hostOf);
        } catch (const Error& e) {
          throw Error(e.code(), name + " (enqueued on a stream): " + e.what());
        }
      },
      stream, order);
}

namespace {

// What every rank's host step of a call on the peers' device memory
// checks: that all ranks run the same call. The step is a barrier that also
// compares values[0], the call's fingerprint (algorithms/fingerprint.h:
// kind, datatype, op, count), and for windows where each rank's buffers sit
// (values[1..4]: window and offset of the input, then of the output), as
// the largest and smallest over the ranks, in one all-reduce. Ranks that
// disagree would otherwise run different numbers of phases over each
// other's slots, or read their peers at the wrong places; they fail before
// anyone reads. The first step of a call on the peer windows compares the
// same five values (no window: #0), so ranks of which some found their
// buffers in windows and others not fail that call, saying so, where they
// would otherwise run different programs into each other.
void barrierOfTheSameCall(coilComm* comm, std::span<const uint64_t> values,
                          const std::string& name) {
  try {
    const size_t n = values.size();
    std::vector<uint64_t> mine(2 * n), most(2 * n);
    for (size_t i = 0; i < n; ++i) {
      mine[i] = values[i];
      mine[n + i] = ~values[i];
    }
    usable(comm).collective(
        {algo::CollKind::AllReduce, mine.data(), most.data(), 2 * n, coilUint64, coilMax, 0});
    const uint64_t tag = values[0], largest = most[0], smallest = ~most[n];
    if (largest != smallest)
      fail(coilInvalidUsage, "the ranks called it with different arguments (",
           algo::explainMismatch(largest != tag ? largest : smallest, tag),
           "); every rank must make the same calls");
    for (size_t i = 1; i < n; ++i)
      if (most[i] != ~most[n + i])
        fail(coilInvalidUsage, "the ranks' buffers sit at different places in their windows ",
             "(here: input at byte ", values[2], " of window #", values[1], ", output at byte ",
             values[4], " of window #", values[3], "; #0: not in a window, or not read by the ",
             "peers); a call on windows reads its peers at its own offsets, so every rank passes ",
             "the same places");
  } catch (const Error& e) {
    throw Error(e.code(), name + " (enqueued on a stream): " + e.what());
  }
}

}  // namespace

void enqueuePeerCall(coilComm* comm, const CollectiveCall& call, coilStream_t stream,
                     const char* what) {
  Communicator& c = usable(comm);
  PeerWindows& pw = *comm->peerWindows;
  // The root is part of the fingerprint (as the host engine's): ranks that
  // disagree on it fail instead of reading the wrong rank's slot.
  const uint64_t tag = algo::callTag(0, call.kind, call.type, call.op, call.count, call.root);
  // The first barrier compares what a call on windows compares, with no
  // window (#0).
  const std::array<uint64_t, 5> places = {tag, 0, 0, 0, 0};
  const std::string name = what;
  const algo::DeviceCall device{call.sendbuff, call.recvbuff, call.count,
                                call.type,     call.op,      call.root};
  stagedStreamOf(comm).enqueuePhases(
      algo::deviceWindowPhases(
          call.kind, device, pw.windows, pw.slotBytes, c.rank(),
          [comm, places, name] { barrierOfTheSameCall(comm, places, name); },
          [comm, tag, name] { barrierOfTheSameCall(comm, std::span(&tag, 1), name); }),
      stream, orderOf(comm, c));
  pw.callsRun.fetch_add(1, std::memory_order_relaxed);
}

void enqueuePeerP2p(coilComm* comm, const std::vector<P2pCall>& calls, coilStream_t stream,
                    const char* what) {
  Communicator& c = usable(comm);
  PeerWindows& pw = *comm->peerWindows;
  std::vector<algo::DeviceP2p> batch;
  for (const P2pCall& call : calls)
    batch.push_back({call.isSend, call.buffer, call.count * reduce::typeSize(call.type), call.peer});
  // The tokens travel as host point-to-point messages of two uint64.
  auto exchange = [comm, name = std::string(what)](
                      const std::vector<std::pair<int, algo::P2pToken>>& out,
                      std::vector<std::pair<int, algo::P2pToken>>* in) {
    if (out.empty() && in->empty()) return;  // no pair of this rank has a piece this round
    std::vector<algo::P2pToken> sent;
    for (const auto& o : out) sent.push_back(o.second);
    std::vector<P2pCall> tokens;
    for (size_t i = 0; i < out.size(); ++i)
      tokens.push_back({true, &sent[i], 2, coilUint64, out[i].first});
    for (auto& i : *in) tokens.push_back({false, &i.second, 2, coilUint64, i.first});
    try {
      usable(comm).pointToPoint(tokens);
    } catch (const Error& e) {
      throw Error(e.code(), name + " (enqueued on a stream): " + e.what());
    }
  };
  auto phases = algo::deviceWindowP2pPhases(batch, pw.windows, pw.slotBytes, c.rank(), exchange);
  stagedStreamOf(comm).enqueuePhases(std::move(phases), stream, orderOf(comm, c));
  pw.p2pRun.fetch_add(1, std::memory_order_relaxed);
}

void enqueueRegisteredCall(coilComm* comm, const CollectiveCall& call,
                           const RegisteredCall& windows, coilStream_t stream, const char* what) {
  Communicator& c = usable(comm);
  // The root is in it: ranks that disagree on it fail the call's first
  // barrier. As the peer windows' (enqueuePeerCall), whose first barrier
  // compares the same places, with no window.
  const uint64_t tag = algo::callTag(0, call.kind, call.type, call.op, call.count, call.root);
  // Window #0: a buffer the peers do not read, which may be anywhere.
  const std::array<uint64_t, 5> places = {
      tag, windows.send ? windows.send->id : 0, windows.send ? windows.sendOffset : 0,
      windows.recv ? windows.recv->id : 0, windows.recv ? windows.recvOffset : 0};
  const std::string name = what;
  // Every rank's buffers the peers read, as mapped here; this rank's own
  // in any case (a program reads its own input or output as a peer's).
  const size_t rank = static_cast<size_t>(c.rank());
  std::vector<const void*> peerSend(static_cast<size_t>(c.nranks())), peerRecv(peerSend.size());
  for (size_t q = 0; q < peerSend.size(); ++q) {
    if (windows.send) peerSend[q] = windows.send->byRank[q] + windows.sendOffset;
    if (windows.recv) peerRecv[q] = windows.recv->byRank[q] + windows.recvOffset;
  }
  peerSend[rank] = call.sendbuff;
  peerRecv[rank] = call.recvbuff;
  const algo::DeviceCall device{call.sendbuff, call.recvbuff, call.count,
                                call.type,     call.op,      call.root};
  stagedStreamOf(comm).enqueuePhases(
      algo::registeredPhases(
          call.kind, device, peerSend, peerRecv, c.rank(),
          [comm, places, name] { barrierOfTheSameCall(comm, places, name); },
          [comm, tag, name] { barrierOfTheSameCall(comm, std::span(&tag, 1), name); }),
      stream, orderOf(comm, c));
  comm->windows->callsRun.fetch_add(1, std::memory_order_relaxed);
}

bool copiesOnOneRank(const coilComm* comm, const CollectiveCall& call, const CallBuffers& use) {
  return comm->nranks == 1 && call.kind != algo::CollKind::Barrier && call.op < coilNumOps &&
         use.sendBytes == use.recvBytes;
}

void enqueueOneRankCopy(coilComm* comm, const CallBuffers& use, coilStream_t stream) {
  usable(comm);  // a revoked or aborted communicator still refuses the call
  if (use.recvBytes > 0 && use.send != use.recv)
    device::copyAsync(const_cast<void*>(use.recv), use.send, use.recvBytes, stream);
}

void drainStaged(coilComm* comm) {
  if (comm->staged) comm->staged->drain();
}

}  // namespace coil::api

using namespace coil;

extern "C" {

coilResult_t coilMemAlloc(void** ptr, size_t size) {
  return api::guarded("coilMemAlloc", nullptr, [&] {
    if (ptr == nullptr) fail(coilInvalidArgument, "ptr is NULL");
    *ptr = nullptr;
    if (!device::available()) fail(coilInvalidUsage, device::unavailableReason());
    *ptr = device::allocDevice(size);
  });
}

coilResult_t coilMemFree(void* ptr) {
  return api::guarded("coilMemFree", nullptr, [&] {
    if (ptr == nullptr) return;
    if (device::kindOf(ptr) != device::MemKind::kDevice)
      fail(coilInvalidArgument, "ptr ", ptr, " is not device memory from coilMemAlloc");
    device::freeDevice(ptr);
  });
}

coilResult_t coilCommCuDevice(const coilComm_t comm, int* device) {
  return api::guarded("coilCommCuDevice", comm, [&] {
    api::InFlight busy(comm);
    if (device == nullptr) fail(coilInvalidArgument, "device is NULL");
    *device = comm->device;
  });
}

}  // extern "C"
