// Groups. At the outermost coilGroupEnd, first the inits and splits made
// inside the group run, all at once (NCCL's single-thread pattern: one
// thread creates or splits every rank between coilGroupStart and
// coilGroupEnd; each rank's call waits for the others, so they can only
// complete together). Then the queued operations of each communicator run
// in order: collectives first (every rank queued the same ones, in the same
// order), then all point-to-point operations as one concurrent batch.
// Several communicators in one group (the single-thread, many-ranks pattern
// of coilCommInitAll) each run on their own thread, since their ranks must
// progress at the same time. On device buffers, collectives that the peer
// windows take alone take them in a group too (runQueue).
#include "api/group.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/guard.h"
#include "api/group_estimate.h"
#include "api/peer_windows.h"

namespace coil::api {
namespace {

struct Queued {
  coilComm* comm;
  std::vector<CollectiveCall> collectives;
  std::vector<CallBuffers> collectiveUse;  // by collective: the bytes it reads and writes
  std::vector<P2pCall> p2p;
  std::vector<CallBuffers> p2pUse;
  // Set by the first call with buffers; the others must agree.
  bool kindKnown = false;
  bool device = false;
  coilStream_t stream = nullptr;
};

struct GroupState {
  int depth = 0;
  std::vector<DeferredCall> deferred;  // inits and splits, in call order
  std::vector<Queued> queues;          // one per communicator, in first-use order
};

thread_local GroupState tGroup;

Queued& queueOf(coilComm* comm) {
  for (Queued& q : tGroup.queues)
    if (q.comm == comm) return q;
  Queued fresh;
  fresh.comm = comm;
  tGroup.queues.push_back(std::move(fresh));
  return tGroup.queues.back();
}

// Records where a queued call's buffers are; all of a communicator's calls
// in the group must be on one memory kind and one stream.
void noteBuffers(Queued& q, const CallBuffers& use, bool device, coilStream_t stream) {
  if (use.sendBytes == 0 && use.recvBytes == 0) return;  // moves nothing: no say
  if (q.kindKnown && (q.device != device || q.stream != stream))
    fail(coilInvalidUsage, "a group's calls on one communicator must all use host buffers or all "
                           "device buffers on one stream (this call uses ",
         device ? "device" : "host", " buffers", device ? " on another stream" : "", ")");
  q.kindKnown = true;
  q.device = device;
  q.stream = stream;
}

// Runs collectives in order, then the point-to-point operations as one
// concurrent batch: now on host buffers, as one staged job on the stream
// on device buffers.
void runTogether(const Queued& q, std::vector<CollectiveCall> collectives,
                 std::vector<P2pCall> p2p, const std::vector<device::DeviceRange>& ranges) {
  runOrEnqueue(q.comm, q.device, ranges, q.stream, "coilGroupEnd",
               [collectives = std::move(collectives), p2p = std::move(p2p)](Communicator& c,
                                                                            const HostOf& of) {
                 for (const CollectiveCall& call : collectives) c.collective(hostCall(call, of));
                 std::vector<P2pCall> batch;
                 for (const P2pCall& call : p2p) batch.push_back(hostCall(call, of));
                 if (!batch.empty()) c.pointToPoint(batch);
               });
}

// One communicator's queued calls (now, or on their stream): collectives
// first, in order, then the point-to-point operations as one concurrent
// batch. On device buffers, a collective that the peer windows take alone
// (runsOnPeerWindows: the same answer on every rank) takes them in a group
// too, between the staged jobs of the calls around it, in the same order
// on the stream: NCCL's habit of grouping a step's collectives must not
// send them all through host memory. So do the sends and receives that
// sendsThroughPeerWindows picks (by size, the same at both ends), as a
// batch of their own before the staged one: the order of the messages
// between two ranks is kept within each batch, and both ranks split alike.
coilResult_t runQueue(Queued& q) {
  return guarded("coilGroupEnd", q.comm, [&] {
    InFlight busy(q.comm);
    usable(q.comm);  // a comm that cannot run fails here, not on its stream
    std::vector<CollectiveCall> staged;
    std::vector<device::DeviceRange> ranges;
    for (size_t i = 0; i < q.collectives.size(); ++i) {
      const CollectiveCall& call = q.collectives[i];
      if (q.device && runsOnPeerWindows(q.comm, call)) {
        if (!staged.empty())
          runTogether(q, std::exchange(staged, {}), {}, std::exchange(ranges, {}));
        enqueuePeerCall(q.comm, call, q.stream, "coilGroupEnd");
        continue;
      }
      staged.push_back(call);
      if (q.device) addRanges(q.collectiveUse[i], &ranges);
    }
    // Sends and receives: those the peer windows take as one batch, after
    // the collectives, then the others as one staged batch. Their buffers'
    // ranges go with that batch, not with the collectives' job that may run
    // before the windows' batch.
    std::vector<P2pCall> throughWindows, stagedP2p;
    std::vector<device::DeviceRange> p2pRanges;
    for (size_t i = 0; i < q.p2p.size(); ++i) {
      if (q.device && sendsThroughPeerWindows(q.comm, q.p2p[i])) {
        throughWindows.push_back(q.p2p[i]);
        continue;
      }
      stagedP2p.push_back(q.p2p[i]);
      if (q.device) addRanges(q.p2pUse[i], &p2pRanges);
    }
    if (!throughWindows.empty()) {
      if (!staged.empty())
        runTogether(q, std::exchange(staged, {}), {}, std::exchange(ranges, {}));
      enqueuePeerP2p(q.comm, throughWindows, q.stream, "coilGroupEnd");
    }
    ranges.insert(ranges.end(), p2pRanges.begin(), p2pRanges.end());
    if (!staged.empty() || !stagedP2p.empty())
      runTogether(q, std::move(staged), std::move(stagedP2p), ranges);
  });
}

// Runs the group's inits and splits together, one thread each (they wait
// for each other). Returns the first failure (its message stored for this
// thread, prefixed with `function`), else coilInProgress when a
// non-blocking one is still running, else coilSuccess.
coilResult_t runDeferred(std::vector<DeferredCall>& calls, const char* function) {
  std::vector<coilResult_t> results(calls.size(), coilSuccess);
  std::vector<std::string> why(calls.size());
  if (calls.size() == 1) {
    results[0] = calls[0].run(&why[0]);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < calls.size(); ++i)
      threads.emplace_back([&, i] { results[i] = calls[i].run(&why[i]); });
    for (auto& t : threads) t.join();
  }
  bool pending = false;
  for (size_t i = 0; i < calls.size(); ++i) {
    pending = pending || results[i] == coilInProgress;
    if (results[i] == coilSuccess || results[i] == coilInProgress) continue;
    recordError(nullptr, std::string(function) + ": call " + std::to_string(i + 1) + " of " +
                             std::to_string(calls.size()) + " in this group failed: " + why[i]);
    return results[i];
  }
  return pending ? coilInProgress : coilSuccess;
}

// Takes this thread's group away for the outermost end.
GroupState takeGroup() {
  GroupState g = std::move(tGroup);
  tGroup = GroupState{};
  return g;
}

}  // namespace

// coilGroupStart calls not yet ended, over all threads. Zero, the usual
// case, answers inGroup() without this thread's group, a thread-local
// lookup (__tls_get_addr in a shared library) on every call. Each thread
// takes off only what it added, and sees its own additions: when its depth
// is above zero, so is the count it reads.
std::atomic<int64_t> gOpenGroupStarts{0};

bool inGroup() {
  return gOpenGroupStarts.load(std::memory_order_relaxed) != 0 && tGroup.depth > 0;
}

void enqueueCollective(coilComm* comm, const CollectiveCall& call, const CallBuffers& use,
                       bool device, coilStream_t stream) {
  Queued& q = queueOf(comm);
  noteBuffers(q, use, device, stream);
  q.collectives.push_back(call);
  q.collectiveUse.push_back(use);
}

void enqueueP2p(coilComm* comm, const P2pCall& call, const CallBuffers& use, bool device,
                coilStream_t stream) {
  Queued& q = queueOf(comm);
  noteBuffers(q, use, device, stream);
  q.p2p.push_back(call);
  q.p2pUse.push_back(use);
}

void enqueueDeferred(DeferredCall call) { tGroup.deferred.push_back(std::move(call)); }

}  // namespace coil::api

using namespace coil;

extern "C" coilResult_t coilGroupStart(void) {
  api::gOpenGroupStarts.fetch_add(1, std::memory_order_relaxed);
  ++api::tGroup.depth;
  return coilSuccess;
}

extern "C" coilResult_t coilGroupEnd(void) {
  auto& g = api::tGroup;
  if (g.depth == 0)
    return api::guarded("coilGroupEnd", nullptr, [] {
      fail(coilInvalidUsage, "coilGroupEnd without a matching coilGroupStart");
    });
  api::gOpenGroupStarts.fetch_sub(1, std::memory_order_relaxed);
  if (--g.depth > 0) return coilSuccess;
  api::GroupState group = api::takeGroup();
  const coilResult_t initResult = api::runDeferred(group.deferred, "coilGroupEnd");
  std::vector<api::Queued>& queues = group.queues;
  std::vector<coilResult_t> results(queues.size(), coilSuccess);
  if (queues.size() == 1) {
    results[0] = api::runQueue(queues[0]);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < queues.size(); ++i)
      threads.emplace_back([&, i] { results[i] = api::runQueue(queues[i]); });
    for (auto& t : threads) t.join();
  }
  if (initResult != coilSuccess && initResult != coilInProgress) return initResult;
  for (size_t i = 0; i < queues.size(); ++i)
    if (results[i] != coilSuccess) {
      // The message is already stored on that communicator and this thread.
      std::string msg = coilGetLastError(queues[i].comm);
      api::recordError(nullptr, msg);
      return results[i];
    }
  return initResult;
}

extern "C" coilResult_t coilGroupSimulateEnd(coilSimInfo_t* simInfo) {
  auto& g = api::tGroup;
  return api::guarded("coilGroupSimulateEnd", nullptr, [&] {
    if (g.depth == 0) fail(coilInvalidUsage, "coilGroupSimulateEnd without a matching coilGroupStart");
    api::checkSimInfo(simInfo);
    api::gOpenGroupStarts.fetch_sub(1, std::memory_order_relaxed);
    if (--g.depth > 0) return;  // as coilGroupEnd: only the outermost end acts
    api::GroupState group = api::takeGroup();
    // Inits and splits are not operations: they run as at coilGroupEnd, so
    // that the estimate can use the new communicators' cost models.
    const coilResult_t initResult = api::runDeferred(group.deferred, "coilGroupSimulateEnd");
    if (initResult != coilSuccess && initResult != coilInProgress) {
      const std::string why = api::threadLastError();  // "coilGroupSimulateEnd: ..."
      fail(initResult, why.substr(why.find(": ") + 2));
    }
    // The operations are estimated, never run: the group is dropped.
    double slowest = 0;
    for (const api::Queued& q : group.queues)
      slowest = std::max(slowest, api::estimateUs(q.comm, q.collectives, q.p2p));
    simInfo->estimatedTime = static_cast<float>(slowest);
  });
}
