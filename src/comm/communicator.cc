#include "comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "algorithms/caller_path_executor.h"
#include "algorithms/failure_notice.h"
#include "algorithms/fifo_executor.h"
#include "algorithms/fingerprint.h"
#include "algorithms/ring.h"
#include "comm/cpu_share.h"
#include "comm/gpu_share.h"
#include "comm/host_identity.h"
#include "comm/model_agreement.h"
#include "core/cpu_cache.h"
#include "core/env.h"
#include "core/error.h"
#include "core/printable.h"
#include "core/log.h"
#include "core/variables.h"
#include "reduce/reduce.h"
#include "topo/binding.h"
#include "topo/process_topology.h"
#include "transports/caller_io.h"

namespace coil {

int64_t resolveTimeoutMs(int64_t configured) {
  if (configured > 0) return configured;
  if (auto ms = env::getInt("COIL_TIMEOUT_MS", 1, INT64_C(1) << 40)) return *ms;
  return 30 * 60 * 1000;
}

namespace {

// The costs inside one host: the cheapest transport of this build that maps
// its peers' memory (one that only runs between ranks of a host). Taken from
// the build, not from this rank's peers, so every rank predicts alike.
const transport::Traits& localTraits() {
  static const transport::Traits local = [] {
    std::optional<transport::Traits> best;
    for (const std::string& name : transport::registeredTransports()) {
      const transport::Traits t = transport::createTransport(name)->traits();
      if (t.peerMemoryMapped && (!best || t.fifo.betaUsPerB < best->fifo.betaUsPerB)) best = t;
    }
    return best ? *best : transport::createTransport(transport::registeredTransports().front())->traits();
  }();
  return local;
}

// What each rank tells every other at init.
struct RankRecord {
  transport::PeerInfo peer;
  uint32_t version;
  char forcedTransport[16];  // netName or COIL_TRANSPORT, or empty
  uint8_t hasGpu;            // CommOptions::gpuUuid, when set
  std::array<uint8_t, 16> gpuUuid;
};

struct SliceRecord {
  uint64_t sliceBytes;
  uint64_t slotCount;
  uint64_t callerIoBytes;  // the largest message of its caller-driven paths; 0: a peer has none
  uint64_t expressBytes;   // the same over the peers whose links offer one (UINT64_MAX: none do)
};

// Ids of communicators in this process, for link claims (0 is "unclaimed").
std::atomic<uint64_t> nextCommunicatorId{1};

std::string hex(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// True when an MPS control daemon seems to run for this user: its pipe is
// there (CUDA_MPS_PIPE_DIRECTORY, or CUDA's default).
bool mpsPipeExists() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  return access((std::string(dir && *dir ? dir : "/tmp/nvidia-mps") + "/control").c_str(), F_OK) == 0;
}

// Several processes on one GPU, said once per process by the lowest rank
// on that GPU (comm/gpu_share.h has the numbers).
void warnGpuSharedByProcesses(int rank, int processes) {
  static std::once_flag once;
  std::call_once(once, [&] {
    if (mpsPipeExists()) return;
    COIL_WARN(kInit, "rank ", rank, ": ", processes,
              " processes of this communicator use this rank's GPU and no MPS daemon was found: "
              "the GPU time-slices between the processes, so each call on device buffers waits "
              "for every one of them (measured ~0.2 ms a call per extra process for small calls). "
              "One rank per GPU, ranks as threads of one process (coilCommInitAll), or MPS avoid "
              "it (docs/performance.md 4.13)");
  });
}

}  // namespace

Communicator::Communicator(const UniqueIdData& id, int nranks, int rank,
                           const CommOptions& options, const std::atomic<bool>* abortFlag,
                           SharedLinks share)
    : rank_(rank),
      nranks_(nranks),
      options_(options),
      abortFlag_(abortFlag),
      id_(nextCommunicatorId.fetch_add(1)) {
  log::setThreadRank(rank);
  // Every init path (init, split, shrink) comes here: the first one warns
  // about misspelt COIL_ names and values no reader knows, which would
  // otherwise be ignored without a word.
  env::warnAboutEnvironmentOnce();
  // A bad COIL_BIND fails init here, rather than in a proxy thread later.
  const topo::BindMode bind = topo::bindMode();
  // The machine, learnt once per process (topo/process_topology.h), and
  // where this rank runs in it: one line, quiet below INFO.
  // Discovery costs milliseconds with hwloc (its CPUs and memory; the PCI
  // devices, three times that, only for ib's device order), so a process
  // learns the machine only when something asks: this line, COIL_BIND=auto,
  // ib's device order, or shm placement on a machine with several NUMA
  // nodes.
  if (log::enabled(log::Level::Info, log::kInit) || bind == topo::BindMode::kAuto) {
    const topo::Topology& machine = topo::processTopology();
    COIL_INFO(kInit, "rank ", rank, " topology: ",
              topo::describeRankPlace(machine, topo::threadCpus()), " [", machine.source,
              ", learnt once per process in ",
              static_cast<int>(topo::discoveryMilliseconds() + 0.5), " ms; COIL_BIND=",
              bind == topo::BindMode::kAuto ? "auto" : "none", "]");
  }
  label_ = hex(id.nonce).substr(0, 12) + "-" + std::to_string(getpid());
  Deadline deadline = Deadline::after(options_.timeoutMs);
  COIL_INFO(kInit, "rank ", rank, "/", nranks, " joining rendezvous at ", id.root.toString(),
            options_.name.empty() ? "" : " comm '" + options_.name + "'");
  bootstrap_ = Bootstrap::create(id, rank, nranks, deadline, abortFlag_);
  // An init that fails from here on tells its ring neighbours (abandon), so
  // that the failure walks the ring instead of waiting for their deadlines.
  struct AbandonIfInitFails {
    Bootstrap& bootstrap;
    const int exceptionsBefore = std::uncaught_exceptions();
    ~AbandonIfInitFails() {
      if (std::uncaught_exceptions() > exceptionsBefore) bootstrap.abandon();
    }
  } abandonIfInitFails{*bootstrap_};
  // The label names shm segments: it must be the same on every rank and
  // unique per communicator; rank 0's pid plus the id nonce is.
  std::vector<int32_t> pids(static_cast<size_t>(nranks));
  pids[rank] = getpid();
  bootstrap_->allGather(pids.data(), sizeof(int32_t));
  label_ = hex(id.nonce).substr(0, 12) + "-" + std::to_string(pids[0]);
  const std::string algoSpec = env::get("COIL_ALGO").value_or("");
  algoOverride_ = tune::AlgorithmOverride(algoSpec);
  // How waiting ranks wait is learned per call (tune/spin_advisor.h), among
  // sleeping at once, polling with pause for up to COIL_SPIN_US (default 50;
  // never when the ranks of this host outnumber the CPUs they may run on,
  // pooled: comm/cpu_share.h) and polling with sched_yield for up to
  // COIL_YIELD_US (default 200). COIL_SPIN=always skips the learning and
  // always polls with pause (a machine known to be quiet).
  std::vector<RankCpus> rankCpus(static_cast<size_t>(nranks));
  rankCpus[rank] = thisRankCpus();
  bootstrap_->allGather(rankCpus.data(), sizeof(RankCpus));
  const CpuShare cpus = cpuShare(rankCpus, rank);
  maxSpinUs_ = cpus.oversubscribed() ? 0 : 50;
  if (auto us = env::getInt("COIL_SPIN_US", 0, 1000000)) maxSpinUs_ = static_cast<int>(*us);
  const int yieldUs = static_cast<int>(env::getInt("COIL_YIELD_US", 0, 1000000).value_or(200));
  const std::string spinMode = env::get("COIL_SPIN").value_or("adaptive");
  if (spinMode != "adaptive" && spinMode != "always")
    fail(coilInvalidUsage, "COIL_SPIN=", spinMode, ": expected adaptive or always");
  spin_ = tune::SpinAdvisor(maxSpinUs_, yieldUs,
                            spinMode == "always" ? tune::SpinAdvisor::Mode::kAlways
                                                 : tune::SpinAdvisor::Mode::kAdaptive);
  if (share.lease) seqSalt_ = static_cast<uint32_t>(id.nonce >> 40);  // same on every rank
  connectPeers(deadline, std::move(share));
  agreeOnSlices();
  tune::Topology topology;
  topology.nranks = nranks;
  const transport::Traits& slowest = slowestTraits();
  topology.transport = slowest.name;
  topology.fifo = slowest.fifo;
  topology.oneShot = slowest.oneShot;
  topology.callerPath = slowest.callerPath;
  topology.transports = transport::registeredTransports();
  topology.chunkBytes = sliceBytes_ * slicesPerChunk_;
  topology.sliceBytes = sliceBytes_;
  // The FIFO one-shot sends one slot per peer, or one message on each
  // peer's caller-driven path (transports/caller_io.h) when all have one.
  topology.fifoSlotBytes = sliceBytes_;
  // The FIFO programs run there too (algorithms/caller_path_executor.h),
  // where all ranks agreed they can (agreeOnSlices).
  if (callerIoBytes_ != 0) topology.fifoSlotBytes = callerIoBytes_;
  topology.callerPieceBytes = callerIoBytes_;
  topology.mixedCallerPaths = mixedExpressBytes_ != 0;
  topology.windowSlotBytes = window_ ? window_->slotBytes() : 0;
  topology.windowInlineBytes = window_ ? transport::Window::kInlineBytes : 0;
  topology.cores = cpus.cpusHere;
  std::vector<int> ranksOnHost;
  for (int h : hostOfRank_) {
    if (h >= static_cast<int>(ranksOnHost.size())) ranksOnHost.resize(h + 1, 0);
    ++ranksOnHost[h];
  }
  topology.hosts = static_cast<int>(ranksOnHost.size());
  topology.smallestHost = *std::min_element(ranksOnHost.begin(), ranksOnHost.end());
  topology.largestHost = *std::max_element(ranksOnHost.begin(), ranksOnHost.end());
  topology.local = localTraits().fifo;
  topology.cacheBytes = lastLevelCacheBytes();
  model_ = tune::Model(topology);
  agreeOnModel(*bootstrap_, rank, nranks, algoSpec, model_);
  // Once per communicator, so INIT's (TUNE's lines are per call).
  COIL_INFO(kInit, "rank ", rank, ": cost model from ", rank == 0 ? model_.origin() : "rank 0");
  tune::Algo forced;
  if (!window_ && nranks > 1 && algoOverride_.forced(algo::CollKind::AllReduce, &forced) &&
      forced == tune::Algo::kSlice)
    COIL_WARN(kTune, "COIL_ALGO forces allreduce:slice, but the ranks share no window (",
              topology.transport, "): the cost model chooses instead");
  sendSeq_.assign(static_cast<size_t>(nranks), 0);
  recvSeq_.assign(static_cast<size_t>(nranks), 0);
  if (model_.params().probeLink && nranks > 1) {  // rank 0's choice
    if (borrowsLinks_) adoptParentsLink();
    else probeLinkAcrossHosts();
  }
  COIL_INFO(kInit, "rank ", rank, "/", nranks, " ready (slice ", sliceBytes_ / 1024, " KiB, ",
            slicesPerChunk_, " slices per chunk)");
}

Communicator::~Communicator() {
  // Peers still waiting on this rank's window see it close, not a timeout.
  if (window_) window_->close(false);
  // The last user of the links stops their helper threads and closes them;
  // a child that borrowed them keeps them open.
  links_.reset();
  if (bootstrap_) bootstrap_->close();
}

std::pair<std::string, std::string> Communicator::linkReport(int peer) const {
  if (peer == rank_) return {"self", ""};
  const transport::Connection* c = peers_.at(static_cast<size_t>(peer));
  const std::string name = c ? c->traits().name : "none";
  if (linkReason_.empty() || linkReason_[peer].empty())
    return {name, "the parent communicator's link (split with shared links)"};
  return {name, linkReason_[peer]};
}

void Communicator::connectPeers(const Deadline& deadline, SharedLinks share) {
  // The config's netName (already a transport's name) wins over the
  // environment; errors name whichever forced it.
  const bool byConfig = !options_.transport.empty();
  const std::string forced =
      byConfig ? options_.transport : env::get("COIL_TRANSPORT").value_or("");
  const std::string forcedBy = byConfig ? "config->netName" : "COIL_TRANSPORT";
  const auto available = transport::registeredTransports();
  if (!forced.empty() && std::find(available.begin(), available.end(), forced) == available.end()) {
    std::string list;
    for (const auto& n : available) list += (list.empty() ? "" : ", ") + n;
    fail(coilInvalidUsage, forcedBy, "=", forced, " is not a transport of this build (", list,
         ")");
  }

  std::vector<RankRecord> records(static_cast<size_t>(nranks_));
  std::memset(records.data(), 0, records.size() * sizeof(RankRecord));
  RankRecord& me = records[rank_];
  me.peer = {localHostHash(), static_cast<int32_t>(getpid()), rank_};
  me.version = COIL_VERSION_CODE;
  std::snprintf(me.forcedTransport, sizeof me.forcedTransport, "%s", forced.c_str());
  if (options_.gpuUuid) me.hasGpu = 1, me.gpuUuid = *options_.gpuUuid;
  bootstrap_->allGather(records.data(), sizeof(RankRecord));

  std::vector<transport::PeerInfo> infos;
  for (int r = 0; r < nranks_; ++r) {
    const RankRecord& rec = records[r];
    if (rec.version != COIL_VERSION_CODE)
      fail(coilInvalidUsage, "rank ", r, " runs coil version ", rec.version, ", this rank ",
           COIL_VERSION_CODE);
    if (std::strncmp(rec.forcedTransport, me.forcedTransport, sizeof me.forcedTransport) != 0)
      fail(coilInvalidUsage, forcedBy, " differs between ranks: rank ", r, " has '",
           // A peer's bytes: bounded, and shown printable.
           printableText(rec.forcedTransport,
                         strnlen(rec.forcedTransport, sizeof rec.forcedTransport), 32),
           "', rank ", rank_, " has '", me.forcedTransport, "'");
    infos.push_back(rec.peer);
  }
  std::vector<RankGpu> gpus;
  for (const RankRecord& rec : records)
    gpus.push_back({rec.peer.hostHash, rec.peer.pid,
                    rec.hasGpu ? std::optional(rec.gpuUuid) : std::nullopt});
  const GpuShare gpu = gpuShare(gpus, rank_);
  sharesGpuInProcess_ = gpu.withThreads;
  allOnOneHostWithGpus_ = coil::allOnOneHostWithGpus(gpus);
  processSpread_ = coil::processSpread(gpus);
  if (gpu.processes > 1 && gpu.lowestRank) warnGpuSharedByProcesses(rank_, gpu.processes);

  // Which ranks share a host, as dense indexes by first appearance: the
  // same on every rank (the hierarchical all-reduce and its cost use it).
  hostOfRank_.assign(static_cast<size_t>(nranks_), 0);
  std::vector<uint64_t> hostHashes;
  for (int r = 0; r < nranks_; ++r) {
    auto it = std::find(hostHashes.begin(), hostHashes.end(), infos[r].hostHash);
    if (it == hostHashes.end()) it = hostHashes.insert(hostHashes.end(), infos[r].hostHash);
    hostOfRank_[r] = static_cast<int>(it - hostHashes.begin());
  }
  peers_.assign(static_cast<size_t>(nranks_), nullptr);
  linkOf_.assign(static_cast<size_t>(nranks_), -1);
  if (share.lease) {
    borrowLinks(std::move(share));
    openWindow(infos, deadline);
    return;
  }

  // One transport instance per kind; each peer goes to the first (most
  // preferred) transport that can reach it, or to the forced one. The rule
  // is symmetric, so both ends of a pair pick the same transport.
  // Each transport's address (its device, its port) is exchanged before any
  // connects, so that both ends of a pair judge canReach on the same facts.
  const size_t kinds = available.size();
  std::vector<std::unique_ptr<transport::Transport>> transports;
  for (const auto& name : available) transports.push_back(transport::createTransport(name));
  std::vector<transport::Address> addresses(static_cast<size_t>(nranks_) * kinds);
  for (size_t t = 0; t < kinds; ++t)
    if (forced.empty() || available[t] == forced)
      addresses[static_cast<size_t>(rank_) * kinds + t] = transports[t]->localAddress(*bootstrap_);
  bootstrap_->allGather(addresses.data(), kinds * sizeof(transport::Address));
  auto endpoint = [&](int r, size_t t) {
    transport::Address& a = addresses[static_cast<size_t>(r) * kinds + t];
    a.length = std::min<uint32_t>(a.length, transport::kAddressBytes);  // a peer's bytes
    return transport::Endpoint{infos[r], a};
  };
  std::vector<std::vector<int>> peersOf(kinds);
  linkReason_.assign(static_cast<size_t>(nranks_), "");
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    size_t chosen = kinds;
    // Why each more preferred transport was passed over (coil-topo --comm).
    std::string passed;
    for (size_t t = 0; t < kinds && chosen == kinds; ++t) {
      if (!forced.empty() && available[t] != forced) continue;
      if (transports[t]->canReach(endpoint(rank_, t), endpoint(p, t))) {
        chosen = t;
        break;
      }
      const std::string unusable = transports[t]->unusable();
      passed += (passed.empty() ? "" : "; ") + available[t] + ": " +
                (!unusable.empty() ? unusable
                 : infos[p].hostHash != infos[rank_].hostHash ? std::string("another host")
                                                              : std::string("cannot reach it"));
    }
    if (chosen < kinds)
      linkReason_[p] = !forced.empty() ? "forced by " + forcedBy
                       : passed.empty() ? "the first choice"
                                        : "not " + passed;
    if (chosen == kinds) {
      if (forced.empty())
        fail(coilInvalidUsage, "no transport can reach rank ", p, " from rank ", rank_);
      const size_t t = static_cast<size_t>(
          std::find(available.begin(), available.end(), forced) - available.begin());
      const std::string why = transports[t]->unusable();
      fail(coilInvalidUsage, forcedBy, "=", forced, " cannot reach rank ", p, " from rank ",
           rank_, ": ",
           !why.empty() ? why
                        : "rank " + std::to_string(p) + " cannot use it, or it cannot connect "
                          "these two ranks (see its INFO log, COIL_DEBUG=INFO)");
    }
    peersOf[chosen].push_back(p);
  }

  // Every rank sets up every transport, in registration order, even with no
  // peers on it: setup is collective (it exchanges addresses through the bootstrap).
  std::vector<std::unique_ptr<transport::Connection>> connections;
  for (size_t t = 0; t < available.size(); ++t) {
    std::vector<transport::Address> addressOf(static_cast<size_t>(nranks_));
    for (int r = 0; r < nranks_; ++r) addressOf[static_cast<size_t>(r)] = endpoint(r, t).address;
    transport::SetupContext ctx{*bootstrap_, rank_,      nranks_,    infos,
                                deadline,    abortFlag_, label_,     &addressOf};
    auto conns = transports[t]->connect(ctx, peersOf[t]);
    for (auto& c : conns) {
      COIL_INFO(kInit, "rank ", rank_, " -> rank ", c->peer(), " via ", c->traits().name);
      connections.push_back(std::move(c));
    }
  }
  links_ = LinkLease(
      std::make_shared<LinkSet>(std::move(transports), std::move(connections), nranks_));
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    peers_[p] = links_->link(p);
    linkOf_[p] = p;
    if (peers_[p] == nullptr)
      fail(coilInternalError, "transport setup left rank ", p, " unconnected");
  }
  openWindow(infos, deadline);
}

// A child of coilCommSplit with splitShare=1: the parent's connection to
// parent rank members[i] is this communicator's connection to rank i.
void Communicator::borrowLinks(SharedLinks share) {
  if (share.linkOf.size() != static_cast<size_t>(nranks_) || share.linkOf[rank_] != -1)
    fail(coilInternalError, "shared links describe ", share.linkOf.size(),
         " ranks, this communicator has ", nranks_);
  links_ = std::move(share.lease);
  borrowsLinks_ = true;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const int index = share.linkOf[p];
    if (index < 0 || index >= links_->size() || links_->link(index) == nullptr)
      fail(coilInternalError, "shared links have no connection for rank ", p);
    linkOf_[p] = index;
    peers_[p] = links_->link(index);
    COIL_INFO(kInit, "rank ", rank_, " -> rank ", p, " via ", peers_[p]->traits().name,
              " (the parent's link)");
  }
}

SharedLinks Communicator::sharedLinksFor(const SplitPlan& plan) const {
  SharedLinks share{links_.share(), std::vector<int>(plan.parentRanks.size(), -1)};
  for (size_t i = 0; i < plan.parentRanks.size(); ++i)
    if (plan.parentRanks[i] != rank_) share.linkOf[i] = linkOf_[plan.parentRanks[i]];
  return share;
}

Communicator::LinkClaim::LinkClaim(Communicator& comm) : comm_(comm) {
  LinkSet& links = *comm.links_.get();
  if (!links.everShared()) return;
  for (; claimed_ < comm.nranks_; ++claimed_) {
    const int p = claimed_, index = comm.linkOf_[p];
    if (index < 0) continue;
    const bool closed = links.closed(index);
    const uint64_t holder = closed ? 0 : links.tryClaim(index, comm.id_);
    if (!closed && holder == 0) continue;
    release();  // a throwing constructor runs no destructor
    if (closed)
      fail(coilRemoteError, "the link to rank ", p,
           " was closed by another communicator that shares it (a parent, child or sibling "
           "of coilCommSplit with splitShare=1 broke or was aborted; shared links share fate)");
    if (holder == comm.id_)
      fail(coilInvalidUsage, "this communicator is already running an operation on another "
                             "thread; its operations must not overlap");
    fail(coilInvalidUsage, "the link to rank ", p,
         " is in use by another communicator that shares it (coilCommSplit with "
         "splitShare=1): a communicator must not run operations concurrently with a parent, "
         "child or sibling that shares its links");
  }
}

Communicator::LinkClaim::~LinkClaim() { release(); }

void Communicator::LinkClaim::release() noexcept {
  for (int p = 0; p < claimed_; ++p)
    if (comm_.linkOf_[p] >= 0) comm_.links_->release(comm_.linkOf_[p], comm_.id_);
  claimed_ = 0;
}

// Collective: when every rank is on this host and reaches every peer over
// shm, the ranks also share a window for the one-shot and slice algorithms.
// COIL_SHM_WINDOW=0 turns it off; COIL_SHM_WINDOW_BYTES sizes its slots
// (default 1 MiB: one slice piece, and the largest window one-shot).
void Communicator::openWindow(const std::vector<transport::PeerInfo>& infos,
                              const Deadline& deadline) {
  bool mapped = true;
  for (auto* c : peers_) mapped = mapped && (c == nullptr || c->traits().peerMemoryMapped);
  const bool wanted = mapped &&
                      env::getInt("COIL_SHM_WINDOW", 0, 1).value_or(1) == 1;
  const int64_t slotBytes =
      env::getInt("COIL_SHM_WINDOW_BYTES", 64 << 10, int64_t{1} << 30).value_or(1 << 20);
  transport::SetupContext ctx{*bootstrap_, rank_, nranks_, infos, deadline, abortFlag_, label_};
  window_ = transport::openHostWindow(ctx, wanted,
                                      {static_cast<size_t>(slotBytes), 0});
  COIL_INFO(kInit, "rank ", rank_, window_ ? ": shared window open" : ": no shared window");
}

// Sender and receiver must cut data into the same slices on every link, so
// the slice is the smallest slot of any connection anywhere.
void Communicator::agreeOnSlices() {
  SliceRecord mine{UINT64_MAX, UINT64_MAX, algo::CallerPathExecutor::largestPiece(peers_),
                   UINT64_MAX};
  for (auto* c : peers_) {
    if (!c) continue;
    if (const transport::CallerIo* io = c->callerIo())
      mine.expressBytes = std::min<uint64_t>(mine.expressBytes, io->callerIoMaxBytes());
    mine.sliceBytes = std::min<uint64_t>(
        mine.sliceBytes, std::min(c->sendFifo().slotBytes(), c->recvFifo().slotBytes()));
    mine.slotCount = std::min<uint64_t>(
        mine.slotCount, std::min(c->sendFifo().slotCount(), c->recvFifo().slotCount()));
  }
  std::vector<SliceRecord> all(static_cast<size_t>(nranks_));
  all[rank_] = mine;
  bootstrap_->allGather(all.data(), sizeof(SliceRecord));
  uint64_t slice = UINT64_MAX, slots = UINT64_MAX, callerIo = UINT64_MAX, express = UINT64_MAX;
  for (const auto& r : all) {
    slice = std::min(slice, r.sliceBytes);
    slots = std::min(slots, r.slotCount);
    callerIo = std::min(callerIo, r.callerIoBytes);
    express = std::min(express, r.expressBytes);
  }
  // The caller-driven paths only where every rank has them: a rank whose
  // peers all have one must not use it while a rank with, say, an shm peer
  // reads its FIFOs instead (rank 0 alone on its host and two ranks on
  // another once timed out in the one-shot).
  callerIoBytes_ = static_cast<size_t>(callerIo);
  if (slice == UINT64_MAX) slice = 1 << 20, slots = 2;  // a single rank: no links
  sliceBytes_ = static_cast<size_t>(slice) / 64 * 64;   // whole elements of any type
  // Half the FIFO per chunk: every rank can post its first chunk of a ring
  // round without waiting, which is what keeps the ring deadlock-free.
  slicesPerChunk_ = std::max<size_t>(1, static_cast<size_t>(slots) / 2);
  // Links of both kinds (shm inside hosts, tcp across): the FIFO programs
  // still send across on the caller-driven paths, in chunks of whole
  // slices, where every link that could have one has one that carries a
  // chunk (caller_path_executor.h).
  const bool mixed = callerIoBytes_ == 0 && express != UINT64_MAX && express != 0 &&
                     express >= sliceBytes_ * slicesPerChunk_;
  mixedExpressBytes_ = mixed ? static_cast<size_t>(express) : 0;
}

void Communicator::checkUsable() const {
  // The revoke first: it is why a call in flight broke the communicator.
  if (revokedOrAborted())
    fail(coilInvalidUsage, "the communicator was revoked or aborted (coilCommRevoke/coilCommAbort)");
  coilResult_t err = asyncError_.load();
  if (err != coilSuccess)
    fail(err, "the communicator is broken by an earlier error (",
         resultName(err), "); destroy it and create a new one");
}

void Communicator::breakWith(const Error& e) {
  coilResult_t expected = coilSuccess;
  asyncError_.compare_exchange_strong(expected, e.code());
  // A call cut short by this process's own coilCommRevoke/coilCommAbort
  // failed on request (a shutdown stopping a thread that waits for
  // messages, say): an info line, no warning and no flight-recorder dump.
  const bool revokedHere = revokedOrAborted();
  if (revokedHere)
    COIL_INFO(kColl, e.what());
  else
    COIL_WARN(kColl, e.what());
  if (expected == coilSuccess) noticePeers(e.what());
  closeAll();
  // The error that broke the communicator: its last operations, after the
  // peers were told (closeAll), to the log and COIL_DEBUG_DUMP_ON_ERROR.
  if (expected == coilSuccess && !revokedHere)
    flight_.dump({rank_, nranks_, label_, options_.name}, e.what());
  throw e;
}

namespace {

// Waits until every connection in `conns` has no send left in this process,
// or until `until`; the ones that still have, in order. Polls every
// millisecond: it runs only on the way out (a failure notice, exit).
std::vector<transport::Connection*> waitSent(const std::vector<transport::Connection*>& conns,
                                             std::chrono::steady_clock::time_point until) {
  for (transport::Connection* c : conns) c->kick();
  for (transport::Connection* c : conns)
    while (!c->sent() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<transport::Connection*> left;
  for (transport::Connection* c : conns)
    if (!c->sent()) left.push_back(c);
  return left;
}

}  // namespace

void Communicator::noticePeers(const std::string& message) noexcept {
  // Only the thread that broke the communicator gets here (it is the
  // producer of every send FIFO); an abort from another thread only closes.
  constexpr auto kDeliveryWait = std::chrono::milliseconds(100);
  try {
    {
      std::lock_guard<std::mutex> lock(closeMutex_);
      if (closed_) return;
    }
    const std::string notice = "rank " + std::to_string(rank_) + ": " + message;
    std::vector<transport::Connection*> posted;
    for (transport::Connection* c : peers_)
      if (c != nullptr && algo::postFailureNotice(c->sendFifo(), notice)) {
        c->kick();
        posted.push_back(c);
      }
    // Bounded: a peer that stopped reading its socket must not hold us up.
    waitSent(posted, std::chrono::steady_clock::now() + kDeliveryWait);
  } catch (...) {
    // Best effort: the close that follows still reaches every peer.
  }
}

std::vector<int> Communicator::waitUntilSent(std::chrono::steady_clock::time_point until) noexcept {
  std::vector<int> pending;
  try {
    {
      std::lock_guard<std::mutex> lock(closeMutex_);
      if (closed_) return pending;  // broken: nothing more will leave
    }
    std::vector<transport::Connection*> all;
    for (transport::Connection* c : peers_)
      if (c != nullptr) all.push_back(c);
    for (transport::Connection* c : waitSent(all, until)) pending.push_back(c->peer());
  } catch (...) {
    // Out of memory at exit: nothing to wait for that can be named.
  }
  return pending;
}

void Communicator::closeAll() noexcept {
  std::lock_guard<std::mutex> lock(closeMutex_);
  if (closed_) return;
  closed_ = true;
  if (window_) window_->close(true);
  // Only this communicator's links: a sibling over other peers runs on.
  if (links_)
    for (int index : linkOf_)
      if (index >= 0) links_->close(index);
  if (bootstrap_) bootstrap_->abandon();
}

void Communicator::barrier() {
  uint8_t token = 1, out = 0;
  collective({algo::CollKind::Barrier, &token, &out, 1, coilUint8, coilMax, 0});
}


// The links a collective waits on longest set its costs: the transport
// that moves bytes slowest (β), then the one with the dearest step (α).
const transport::Traits& Communicator::slowestTraits() const {
  const transport::Traits* slowest = nullptr;
  for (auto* c : peers_) {
    if (c == nullptr) continue;
    const transport::Traits& t = c->traits();
    if (slowest == nullptr || t.fifo.betaUsPerB > slowest->fifo.betaUsPerB ||
        (t.fifo.betaUsPerB == slowest->fifo.betaUsPerB && t.fifo.alphaUs > slowest->fifo.alphaUs))
      slowest = &t;
  }
  if (slowest != nullptr) return *slowest;
  // One rank: no link at all; the most preferred transport's costs stand in.
  static const transport::Traits preferred =
      transport::createTransport(transport::registeredTransports().front())->traits();
  return preferred;
}

void Communicator::allGatherAtSetup(void* all, size_t bytes) {
  checkUsable();
  bootstrap_->setDeadline(Deadline::after(options_.timeoutMs));
  bootstrap_->allGather(all, bytes);
}

SplitPlan Communicator::planSplit(int color, int key, bool share) {
  checkUsable();
  struct Entry {
    int32_t color, key, rank, share;
  };
  std::vector<Entry> all(static_cast<size_t>(nranks_));
  all[rank_] = {color, key, rank_, share ? 1 : 0};
  SplitPlan plan;
  std::string disagreement;
  try {
    bootstrap_->setDeadline(Deadline::after(options_.timeoutMs));
    bootstrap_->allGather(all.data(), sizeof(Entry));
    std::vector<Entry> members;
    for (const Entry& e : all)
      if (e.color == color && color != COIL_SPLIT_NOCOLOR) members.push_back(e);
    std::sort(members.begin(), members.end(), [](const Entry& a, const Entry& b) {
      return a.key != b.key ? a.key < b.key : a.rank < b.rank;
    });
    // A child whose ranks disagree on splitShare cannot be built (some would
    // connect, some not): every member sees it and the color gets no child.
    for (const Entry& e : members)
      if (e.share != members.front().share && disagreement.empty())
        disagreement = "splitShare differs between the ranks of color " + std::to_string(color) +
                       ": parent rank " + std::to_string(members.front().rank) + " has " +
                       std::to_string(members.front().share) + ", parent rank " +
                       std::to_string(e.rank) + " has " + std::to_string(e.share);
    const bool leader = !members.empty() && members.front().rank == rank_;
    // Each color's leader hosts its child's rendezvous on this rank's interface.
    std::vector<coilUniqueId> ids(static_cast<size_t>(nranks_));
    std::memset(ids.data(), 0, ids.size() * sizeof(coilUniqueId));
    if (leader && disagreement.empty()) {
      SocketAddress bind = bootstrap_->localAddress();
      bind.setPort(0);
      ids[rank_] = encodeUniqueId(startRoot(bind, options_.timeoutMs));
    }
    bootstrap_->allGather(ids.data(), sizeof(coilUniqueId));
    if (!members.empty() && disagreement.empty()) {
      plan.member = true;
      plan.id = decodeUniqueId(ids[members.front().rank]);
      plan.nranks = static_cast<int>(members.size());
      for (size_t i = 0; i < members.size(); ++i) {
        plan.parentRanks.push_back(members[i].rank);
        if (members[i].rank == rank_) plan.rank = static_cast<int>(i);
      }
    }
  } catch (const Error& e) {
    breakWith(e);
  }
  // Every rank took part in both exchanges: this communicator is intact.
  if (!disagreement.empty()) fail(coilInvalidUsage, disagreement);
  return plan;
}

coilRedOp_t Communicator::createPreMulSum(const void* scalar, coilDataType_t type,
                                          bool hostImmediate) {
  PreMulSum op{type, scalar, {}};
  if (hostImmediate) {
    const auto* p = static_cast<const uint8_t*>(scalar);
    op.immediate.assign(p, p + reduce::typeSize(type));
    op.scalarPtr = nullptr;
  }
  int id = nextOp_++;
  preMulOps_[id] = std::move(op);
  return static_cast<coilRedOp_t>(id);
}

void Communicator::destroyOp(coilRedOp_t op) {
  if (preMulOps_.erase(op) == 0)
    fail(coilInvalidArgument, "op ", static_cast<int>(op),
         " was not created by coilRedOpCreatePreMulSum on this communicator");
}

bool Communicator::validOp(int op, coilDataType_t type) const {
  if (reduce::validOp(op)) return true;
  auto it = preMulOps_.find(op);
  return it != preMulOps_.end() && it->second.type == type;
}

}  // namespace coil
