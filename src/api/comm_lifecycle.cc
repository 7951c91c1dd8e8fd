// Exported functions that create, query and destroy communicators.
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <thread>
#include <vector>

#include "api/comm_create.h"
#include "api/exit_flush.h"
#include "api/config.h"
#include "api/device_calls.h"
#include "api/group.h"
#include "api/guard.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher_env.h"
#include "bootstrap/store_rendezvous.h"
#include "core/env.h"
#include "core/log.h"
#include "device/device.h"

using coil::api::guarded;

namespace coil::api {
namespace {

thread_local std::string tLastError;

void checkRank(int nranks, int rank) {
  if (nranks < 1) fail(coilInvalidArgument, "nranks must be >= 1 (got ", nranks, ")");
  if (rank < 0 || rank >= nranks)
    fail(coilInvalidArgument, "rank ", rank, " is out of range [0, ", nranks, ")");
}

// Runs the collective part of init; stores the outcome in the handle.
void runInit(coilComm* h, UniqueIdData id, CommOptions opts, SharedLinks share) {
  coilResult_t rc = guarded("coilCommInitRank", h, [&] {
    h->impl = std::make_unique<Communicator>(id, h->nranks, h->rank, opts, &h->abortFlag,
                                             std::move(share));
    attachPeerWindows(h);  // collective: device memory the ranks map from each other
  });
  if (rc == coilSuccess) armExitFlush();  // queued sends leave before an exit() (exit_flush.h)
  h->initState.store(rc);
}

// The deferred part of an init made inside a group, at coilGroupEnd. A
// handle destroyed before the group ended is left alone.
coilResult_t runDeferredInit(coilComm* h, const UniqueIdData& id, const CommOptions& opts,
                             bool blocking, std::string* why) {
  try {
    InFlight busy(h);
    if (!blocking) {
      h->initThread = std::thread([h, id, opts] { runInit(h, id, opts, {}); });
      return coilInProgress;
    }
    runInit(h, id, opts, {});
  } catch (const Error&) {
    return coilSuccess;  // destroyed already: nothing to initialise
  }
  const coilResult_t state = h->initState.load();
  if (state != coilSuccess) {
    std::lock_guard<std::mutex> lock(h->errorMutex);
    *why = "rank " + std::to_string(h->rank) + ": " + h->lastError;
  }
  return state;
}

}  // namespace

void splitNow(coilComm* comm, int color, int key, coilComm_t* newcomm, CommOptions opts,
              bool blocking, InitMode* mode) {
  InFlight busy(comm);
  Communicator& c = usable(comm);
  drainStaged(comm);  // the split talks over the links the queued calls use
  const bool share = resolveSplitShare(opts, c.options());
  if (opts.splitShare < 0) opts.splitShare = c.options().splitShare;  // the child's own splits
  SplitPlan plan = c.planSplit(color, key, share);
  if (!plan.member) return;
  // Without sharing the child gets its own connections, independent of the
  // parent. With it, the child borrows the parent's (coil.h states the
  // rules); the lease is taken here, so that from now on the parent claims
  // its links, even while a non-blocking child init runs.
  if (opts.transport.empty()) opts.transport = c.options().transport;  // the parent's netName
  *mode = initModeFor(blocking, false);
  *newcomm = createHandle(plan.id, plan.nranks, plan.rank, opts, *mode,
                          share ? c.sharedLinksFor(plan) : SharedLinks{});
}

coilComm* createHandle(const UniqueIdData& id, int nranks, int rank, const CommOptions& options,
                       InitMode mode, SharedLinks share) {
  auto h = std::make_unique<coilComm>();
  h->rank = rank;
  h->nranks = nranks;
  attachDevice(h.get());  // as NCCL: the device current at init is the communicator's
  CommOptions opts = options;
  // The ranks learn which of them are threads on one GPU (staged_stream.h).
  if (h->device >= 0) opts.gpuUuid = device::uuidOf(h->device);
  registerHandle(h.get());  // live from the start: init records its errors on it
  coilComm* raw = h.get();
  if (mode == InitMode::kDeferredBlocking || mode == InitMode::kDeferredNonBlocking) {
    // Runs at the outermost coilGroupEnd (group.h). The handle is handed
    // out now, failed or not, and the caller destroys it either way. (Only
    // inits are deferred this way, never a split's child: no links to share.)
    const bool blocking = mode == InitMode::kDeferredBlocking;
    enqueueDeferred({[raw, id, opts, blocking](std::string* why) {
      return runDeferredInit(raw, id, opts, blocking, why);
    }});
  } else if (mode == InitMode::kBlocking) {
    runInit(raw, id, opts, std::move(share));
    if (h->initState.load() != coilSuccess) {
      const coilResult_t state = h->initState.load();
      const std::string msg = h->lastError;  // "coilCommInitRank: <why>"
      const size_t colon = msg.find(": ");
      retire(raw);
      bury(h.release());  // never handed out; its shell goes to quarantine
      fail(state, colon == std::string::npos ? msg : msg.substr(colon + 2));
    }
  } else {
    h->initThread = std::thread([raw, id, opts, share = std::move(share)]() mutable {
      runInit(raw, id, opts, std::move(share));
    });
  }
  return h.release();
}

InitMode initModeFor(bool blocking, bool deferrable) {
  if (deferrable && inGroup())
    return blocking ? InitMode::kDeferredBlocking : InitMode::kDeferredNonBlocking;
  return blocking ? InitMode::kBlocking : InitMode::kNonBlocking;
}

coilResult_t initRank(coilComm_t* out, int nranks, const coilUniqueId& commId, int rank,
                      const coilConfig_t* config, const char* function) {
  InitMode mode = InitMode::kBlocking;
  const coilResult_t rc = guarded(function, nullptr, [&] {
    if (out == nullptr) fail(coilInvalidArgument, "comm pointer is NULL");
    *out = nullptr;
    checkRank(nranks, rank);
    const CommOptions opts = optionsFrom(config);  // validate before anything starts
    mode = initModeFor(isBlocking(config), true);
    *out = createHandle(decodeUniqueId(commId), nranks, rank, opts, mode);
  });
  // As NCCL: a non-blocking init says it is still under way.
  return rc == coilSuccess && mode == InitMode::kNonBlocking ? coilInProgress : rc;
}

void recordError(coilComm* comm, const std::string& message) {
  tLastError = message;
  COIL_INFO(kColl, message);
  // A stale or made-up handle gets nothing written into it; a destroyed
  // one whose shell coil still holds keeps the message.
  if (owned(comm)) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    comm->lastError = message;
  }
}

const char* threadLastError() { return tLastError.c_str(); }

Communicator& usable(coilComm* comm) {
  coilResult_t state = comm->initState.load();
  if (state == coilInProgress)
    fail(coilInvalidUsage, "the communicator is still initialising (non-blocking init); poll "
                           "coilCommGetAsyncError until it returns coilSuccess");
  if (state != coilSuccess)
    fail(coilInvalidUsage, "the communicator failed to initialise: ", comm->lastError);
  return *comm->impl;
}

}  // namespace coil::api

using namespace coil;

extern "C" {

coilResult_t coilGetVersion(int* version) {
  return guarded("coilGetVersion", nullptr, [&] {
    if (version == nullptr) fail(coilInvalidArgument, "version is NULL");
    *version = COIL_VERSION_CODE;
  });
}

coilResult_t coilGetUniqueId(coilUniqueId* uniqueId) {
  return guarded("coilGetUniqueId", nullptr, [&] {
    if (uniqueId == nullptr) fail(coilInvalidArgument, "uniqueId is NULL");
    *uniqueId = encodeUniqueId(makeUniqueId());
  });
}

coilResult_t coilCommInitRank(coilComm_t* comm, int nranks, coilUniqueId commId, int rank) {
  return api::initRank(comm, nranks, commId, rank, nullptr, "coilCommInitRank");
}

coilResult_t coilCommInitRankConfig(coilComm_t* comm, int nranks, coilUniqueId commId, int rank,
                                    coilConfig_t* config) {
  return api::initRank(comm, nranks, commId, rank, config, "coilCommInitRankConfig");
}

coilResult_t coilCommInitRankScalable(coilComm_t* newcomm, int nranks, int myrank, int nId,
                                      coilUniqueId* commIds, coilConfig_t* config) {
  coilResult_t rc = guarded("coilCommInitRankScalable", nullptr, [&] {
    if (nId < 1) fail(coilInvalidArgument, "nId must be >= 1 (got ", nId, ")");
    if (commIds == nullptr) fail(coilInvalidArgument, "commIds is NULL");
    for (int i = 0; i < nId; ++i) decodeUniqueId(commIds[i]);  // garbage fails here, named
    // Every rank meets at the first id; roots of the others that this
    // process hosts stop now instead of waiting out their deadline.
    for (int i = 1; i < nId; ++i) withdrawRoot(decodeUniqueId(commIds[i]));
  });
  if (rc != coilSuccess) return rc;
  return api::initRank(newcomm, nranks, commIds[0], myrank, config, "coilCommInitRankScalable");
}

coilResult_t coilCommInitAll(coilComm_t* comms, int ndev, const int* devlist) {
  return guarded("coilCommInitAll", nullptr, [&] {
    if (comms == nullptr) fail(coilInvalidArgument, "comms is NULL");
    if (ndev < 1) fail(coilInvalidArgument, "ndev must be >= 1 (got ", ndev, ")");
    // Ranks that are threads of one process share the device's hardware
    // queues. Ranks on one device call in host order (staged_stream.h), so
    // no stream waits and nothing can deadlock, but streams that share a
    // queue still run one after another: ask for every queue, unless the
    // application chose a number, so that the ranks' copies can overlap.
    // (It takes effect where CUDA has not made its context yet, as when
    // these are its first CUDA calls.)
    if (ndev > 1) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
    // Several ranks on one device are allowed (unlike NCCL): with one GPU,
    // devlist {0, 0, 0} gives three ranks on it. devlist NULL: 0 .. ndev-1,
    // as NCCL, or with fewer devices, rank r on device r % count.
    const int count = device::deviceCount();
    std::vector<int> devices(static_cast<size_t>(ndev), -1);
    for (int r = 0; r < ndev; ++r) {
      if (devlist && devlist[r] < 0) fail(coilInvalidArgument, "devlist[", r, "] is negative");
      if (devlist && count > 0 && devlist[r] >= count)
        fail(coilInvalidArgument, "devlist[", r, "] is device ", devlist[r], " but there are ",
             count, " CUDA devices");
      if (count > 0) devices[r] = devlist ? devlist[r] : r % count;
    }
    const coilUniqueId id = encodeUniqueId(makeLocalUniqueId());
    std::vector<coilResult_t> results(static_cast<size_t>(ndev), coilSuccess);
    std::vector<std::string> errors(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int r = 0; r < ndev; ++r)
      threads.emplace_back([&, r] {
        try {
          if (devices[r] >= 0) device::setDevice(devices[r]);  // the rank's device at init
        } catch (const Error& e) {
          results[r] = e.code();
          errors[r] = e.what();
          return;
        }
        results[r] = coilCommInitRank(&comms[r], ndev, id, r);
        if (results[r] != coilSuccess) errors[r] = api::threadLastError();
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < ndev; ++r) {
      if (results[r] == coilSuccess) continue;
      for (int k = 0; k < ndev; ++k) {
        coilCommDestroy(comms[k]);
        comms[k] = nullptr;
      }
      fail(results[r], "rank ", r, ": ", errors[r]);
    }
  });
}

coilResult_t coilCommInitFromEnv(coilComm_t* comm) {
  LaunchInfo info;
  coilResult_t rc = guarded("coilCommInitFromEnv", nullptr, [&] {
    if (comm == nullptr) fail(coilInvalidArgument, "comm pointer is NULL");
    info = readLauncherEnv();
    if (info.store) info.id = uniqueIdThroughStore(*info.store, info.rank);
  });
  if (rc != coilSuccess) return rc;
  COIL_INFO(kInit, "launched by ", info.launcher, ": rank ", info.rank, " of ", info.nranks);
  return api::initRank(comm, info.nranks, encodeUniqueId(info.id), info.rank, nullptr,
                       "coilCommInitFromEnv");
}

coilResult_t coilCommSplit(coilComm_t comm, int color, int key, coilComm_t* newcomm,
                           coilConfig_t* config) {
  api::InitMode mode = api::InitMode::kBlocking;
  const coilResult_t rc = guarded("coilCommSplit", comm, [&] {
    api::InFlight busy(comm);
    api::usable(comm);
    if (newcomm == nullptr) fail(coilInvalidArgument, "newcomm is NULL");
    *newcomm = nullptr;
    if (color < 0 && color != COIL_SPLIT_NOCOLOR)
      fail(coilInvalidArgument, "color must be >= 0 or COIL_SPLIT_NOCOLOR (got ", color, ")");
    const CommOptions opts = api::optionsFrom(config);
    const bool blocking = api::isBlocking(config);
    if (api::inGroup()) {
      // Collective over the parent: with the group's other calls, at the
      // outermost coilGroupEnd (group.h), which writes *newcomm.
      api::enqueueDeferred({[comm, color, key, newcomm, opts, blocking](std::string* why) {
        api::InitMode m = api::InitMode::kBlocking;
        const coilResult_t r = guarded("coilCommSplit", comm, [&] {
          api::splitNow(comm, color, key, newcomm, opts, blocking, &m);
        });
        if (r != coilSuccess) *why = api::threadLastError();
        if (r == coilSuccess && m == api::InitMode::kNonBlocking && *newcomm != nullptr)
          return coilInProgress;
        return r;
      }});
      return;
    }
    api::splitNow(comm, color, key, newcomm, opts, blocking, &mode);
  });
  // A non-blocking child is still joining; no color made no child.
  return rc == coilSuccess && mode == api::InitMode::kNonBlocking && *newcomm != nullptr
             ? coilInProgress
             : rc;
}

coilResult_t coilCommFinalize(coilComm_t comm) {
  return guarded("coilCommFinalize", comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    api::drainStaged(comm);  // outstanding work: the calls still on streams
    c.barrier();
  });
}

// Shared by destroy and abort, after retire(): wait for init and for calls
// still inside, then free. With abort set, both end within ~10 ms (every
// wait polls it).
static void releaseHandle(coilComm* comm) {
  if (comm->initThread.joinable()) comm->initThread.join();
  while (comm->inflight.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  api::bury(comm);
}

coilResult_t coilCommDestroy(coilComm_t comm) {
  if (comm == nullptr) return coilSuccess;
  return guarded("coilCommDestroy", comm, [&] {
    // A second destroy, or a stale handle, throws here; a handle inherited
    // through fork() is only forgotten.
    if (!api::retire(comm)) return;
    if (comm->initThread.joinable()) comm->abortFlag.store(true);  // stop a pending init
    releaseHandle(comm);
  });
}

coilResult_t coilCommAbort(coilComm_t comm) {
  if (comm == nullptr) return coilSuccess;
  return guarded("coilCommAbort", comm, [&] {
    if (!api::retire(comm)) return;  // inherited through fork(): the parent's to abort
    comm->abortFlag.store(true);
    if (comm->initState.load() == coilSuccess) comm->impl->closeAll();
    releaseHandle(comm);
  });
}

coilResult_t coilCommRevoke(coilComm_t comm) {
  return guarded("coilCommRevoke", comm, [&] {
    api::InFlight busy(comm);
    comm->abortFlag.store(true);  // a pending non-blocking init stops too
    if (comm->initState.load() == coilSuccess) comm->impl->closeAll();
  });
}

coilResult_t coilCommCount(const coilComm_t comm, int* count) {
  return guarded("coilCommCount", comm, [&] {
    api::InFlight busy(comm);
    if (count == nullptr) fail(coilInvalidArgument, "count is NULL");
    *count = comm->nranks;
  });
}

coilResult_t coilCommUserRank(const coilComm_t comm, int* rank) {
  return guarded("coilCommUserRank", comm, [&] {
    api::InFlight busy(comm);
    if (rank == nullptr) fail(coilInvalidArgument, "rank is NULL");
    *rank = comm->rank;
  });
}

coilResult_t coilCommGetAsyncError(coilComm_t comm, coilResult_t* asyncError) {
  return guarded("coilCommGetAsyncError", comm, [&] {
    api::InFlight busy(comm);
    if (asyncError == nullptr) fail(coilInvalidArgument, "asyncError is NULL");
    coilResult_t state = comm->initState.load();
    if (state == coilSuccess) state = comm->impl->asyncError();
    // An error of work enqueued on a stream (device buffers), as NCCL
    // reports the failures of kernels it enqueued.
    if (state == coilSuccess) state = comm->deviceError.load();
    *asyncError = state;
  });
}

const char* coilGetErrorString(coilResult_t result) { return resultName(result); }

const char* coilGetLastError(coilComm_t comm) {
  if (api::owned(comm)) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    if (!comm->lastError.empty()) return comm->lastError.c_str();
  }
  return api::threadLastError();
}

coilResult_t coilCommRegister(const coilComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("coilCommRegister", comm, [&] {
    if (handle == nullptr) fail(coilInvalidArgument, "handle is NULL");
    *handle = nullptr;
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    *handle = c.registerBuffer(buff, size);
  });
}

coilResult_t coilCommWindowRegister(coilComm_t comm, void* buff, size_t size, coilWindow_t* win,
                                    int winFlags) {
  return guarded("coilCommWindowRegister", comm, [&] {
    api::InFlight busy(comm);
    if (win != nullptr) *win = nullptr;
    api::registerWindow(comm, buff, size, winFlags, win);
  });
}

coilResult_t coilCommWindowDeregister(coilComm_t comm, coilWindow_t win) {
  return guarded("coilCommWindowDeregister", comm, [&] {
    api::InFlight busy(comm);
    api::deregisterWindow(comm, win);
  });
}

coilResult_t coilCommDeregister(const coilComm_t comm, void* handle) {
  return guarded("coilCommDeregister", comm, [&] {
    api::InFlight busy(comm);
    Communicator& c = api::usable(comm);
    c.deregisterBuffer(handle);
  });
}

}  // extern "C"
