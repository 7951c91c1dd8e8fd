// Groups. At the outermost coilGroupEnd, first the inits made inside the
// group run, all at once (NCCL's single-thread pattern: one thread creates
// every rank between coilGroupStart and coilGroupEnd; each rank's init waits
// for the others, so they can only complete together). Then the queued
// operations of each communicator run in order: collectives first (every
// rank queued the same ones, in the same order), then all point-to-point
// operations as one concurrent batch. Several communicators in one group
// (the single-thread, many-ranks pattern of coilCommInitAll) each run on
// their own thread, since their ranks must progress at the same time.
#include "api/group.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "api/guard.h"
#include "api/group_estimate.h"

namespace coil::api {
namespace {

struct Queued {
  coilComm* comm;
  std::vector<CollectiveCall> collectives;
  std::vector<P2pCall> p2p;
};

struct GroupState {
  int depth = 0;
  std::vector<DeferredInit> inits;  // in call order
  std::vector<Queued> queues;       // one per communicator, in first-use order
};

thread_local GroupState tGroup;

Queued& queueOf(coilComm* comm) {
  for (Queued& q : tGroup.queues)
    if (q.comm == comm) return q;
  tGroup.queues.push_back({comm, {}, {}});
  return tGroup.queues.back();
}

coilResult_t runQueue(Queued& q) {
  return guarded("coilGroupEnd", q.comm, [&] {
    InFlight busy(q.comm);
    Communicator& c = usable(q.comm);
    for (const CollectiveCall& call : q.collectives) c.collective(call);
    if (!q.p2p.empty()) c.pointToPoint(q.p2p);
  });
}

// Runs one deferred blocking init; a handle destroyed before the group
// ended is skipped (its init never starts).
void runInit(DeferredInit& init) {
  try {
    InFlight busy(init.comm);
    init.run();
  } catch (const Error&) {
  }
}

// Runs the group's inits together: the blocking ones on threads joined
// here, the non-blocking ones on their handle's own init thread, left
// running. Returns the first failure of a blocking init (its message
// stored for this thread, prefixed with `function`), else coilInProgress
// when any init is non-blocking, else coilSuccess.
coilResult_t runInits(std::vector<DeferredInit>& inits, const char* function) {
  bool pending = false;
  std::vector<std::thread> threads;
  for (DeferredInit& init : inits) {
    if (init.blocking) {
      if (inits.size() == 1) runInit(init);
      else threads.emplace_back([&init] { runInit(init); });
      continue;
    }
    pending = true;
    try {
      InFlight busy(init.comm);
      init.comm->initThread = std::thread(std::move(init.run));
    } catch (const Error&) {
    }
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < inits.size(); ++i) {
    const DeferredInit& init = inits[i];
    if (!init.blocking || !owned(init.comm)) continue;
    const coilResult_t state = init.comm->initState.load();
    if (state == coilSuccess || state == coilInProgress) continue;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(init.comm->errorMutex);
      why = init.comm->lastError;
    }
    recordError(nullptr, std::string(function) + ": the init of rank " + std::to_string(init.comm->rank) +
                             " (" + std::to_string(i + 1) + " of " +
                             std::to_string(inits.size()) + " in this group) failed: " + why);
    return state;
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

bool inGroup() { return tGroup.depth > 0; }

void enqueueCollective(coilComm* comm, const CollectiveCall& call) {
  queueOf(comm).collectives.push_back(call);
}

void enqueueP2p(coilComm* comm, const P2pCall& call) { queueOf(comm).p2p.push_back(call); }

void enqueueInit(DeferredInit init) { tGroup.inits.push_back(std::move(init)); }

}  // namespace coil::api

using namespace coil;

extern "C" coilResult_t coilGroupStart(void) {
  ++api::tGroup.depth;
  return coilSuccess;
}

extern "C" coilResult_t coilGroupEnd(void) {
  auto& g = api::tGroup;
  if (g.depth == 0)
    return api::guarded("coilGroupEnd", nullptr, [] {
      fail(coilInvalidUsage, "coilGroupEnd without a matching coilGroupStart");
    });
  if (--g.depth > 0) return coilSuccess;
  api::GroupState group = api::takeGroup();
  const coilResult_t initResult = api::runInits(group.inits, "coilGroupEnd");
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
    if (--g.depth > 0) return;  // as coilGroupEnd: only the outermost end acts
    api::GroupState group = api::takeGroup();
    // Inits are not operations: they run as at coilGroupEnd, so that the
    // estimate can use the new communicators' cost models.
    const coilResult_t initResult = api::runInits(group.inits, "coilGroupSimulateEnd");
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
