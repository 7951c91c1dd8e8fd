// Groups. At the outermost coilGroupEnd, the queued operations of each
// communicator run in order: collectives first (every rank queued the same
// ones, in the same order), then all point-to-point operations as one
// concurrent batch. Several communicators in one group (the single-thread,
// many-ranks pattern of coilCommInitAll) each run on their own thread, since
// their ranks must progress at the same time.
#include "api/group.h"

#include <thread>
#include <vector>

#include "api/guard.h"

namespace coil::api {
namespace {

struct Queued {
  coilComm* comm;
  std::vector<CollectiveCall> collectives;
  std::vector<P2pCall> p2p;
};

struct GroupState {
  int depth = 0;
  std::vector<Queued> queues;  // one per communicator, in first-use order
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

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

void enqueueCollective(coilComm* comm, const CollectiveCall& call) {
  queueOf(comm).collectives.push_back(call);
}

void enqueueP2p(coilComm* comm, const P2pCall& call) { queueOf(comm).p2p.push_back(call); }

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
  std::vector<api::Queued> queues = std::move(g.queues);
  g.queues.clear();
  std::vector<coilResult_t> results(queues.size(), coilSuccess);
  if (queues.size() == 1) {
    results[0] = api::runQueue(queues[0]);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < queues.size(); ++i)
      threads.emplace_back([&, i] { results[i] = api::runQueue(queues[i]); });
    for (auto& t : threads) t.join();
  }
  for (size_t i = 0; i < queues.size(); ++i)
    if (results[i] != coilSuccess) {
      // The message is already stored on that communicator and this thread.
      std::string msg = coilGetLastError(queues[i].comm);
      api::recordError(nullptr, msg);
      return results[i];
    }
  return coilSuccess;
}
