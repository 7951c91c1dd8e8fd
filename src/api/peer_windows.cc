#include "api/peer_windows.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "algorithms/device_window_p2p.h"
#include "api/handle.h"
#include "comm/host_identity.h"
#include "core/env.h"
#include "core/log.h"
#include "net/fd_passing.h"
#include "reduce/reduce.h"

namespace coil::api {
namespace {

constexpr int64_t kDefaultSlotBytes = int64_t{32} << 20;
// Below this a device collective is staged through host memory: one
// handover between the GPU and the host instead of two (most collectives:
// one piece and the end) or four (the all-reduce).
constexpr int64_t kDefaultMinBytes = int64_t{256} << 10;
// The descriptor exchange is local to the host; a rank that has not sent
// its own by then is stuck or gone.
constexpr int64_t kExchangeMs = 60'000;

// The windows are made at init, so every exchange here goes over the
// bootstrap (Communicator::allGatherAtSetup), never the links: a
// non-blocking child of a split with splitShare=1 makes its windows while
// its parent may be running operations on the links they share.

// Rank 0's values, on every rank: settings the ranks must share.
void fromRankZero(Communicator& c, uint64_t* values, size_t count) {
  std::vector<uint64_t> all(count * static_cast<size_t>(c.nranks()));
  std::copy(values, values + count, all.begin() + static_cast<ptrdiff_t>(count * c.rank()));
  c.allGatherAtSetup(all.data(), count * sizeof(uint64_t));
  std::copy(all.begin(), all.begin() + static_cast<ptrdiff_t>(count), values);
}

std::string mailboxName(uint64_t token, int rank) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(token));
  return std::string("peer-window-") + hex + "-" + std::to_string(rank);
}

// Sends this rank's descriptor to every other rank, while the caller
// receives theirs (a send waits for its receipt, so one thread could not
// do both in any order that suits every rank). A failed send does not stop
// the others: a peer left without this rank's message waits for it until
// the deadline. Returns the first failure.
std::string sendToEveryPeer(uint64_t token, const Communicator& c, int fd, const Deadline& deadline,
                            const std::atomic<bool>* abortFlag) {
  std::string first;
  for (int peer = 0; peer < c.nranks(); ++peer) {
    if (peer == c.rank()) continue;
    try {
      FdMailbox::send(mailboxName(token, peer), static_cast<uint64_t>(c.rank()),
                      std::span<const int>(&fd, 1), deadline, abortFlag);
    } catch (const Error& e) {
      if (first.empty()) first = "to rank " + std::to_string(peer) + ": " + e.what();
    }
  }
  return first;
}

// COIL_PEER_IPC: how the windows are shared between processes.
enum class Sharing : uint64_t { kAuto, kCuMem, kLegacy };

struct Settings {
  size_t slotBytes;
  size_t minBytes;
  uint64_t token;  // names this communicator's mailboxes on the host
  Sharing sharing;
};

Sharing sharingAsked() {
  const std::optional<std::string> v = env::get("COIL_PEER_IPC");
  if (v == "cumem") return Sharing::kCuMem;
  if (v == "legacy") return Sharing::kLegacy;
  return Sharing::kAuto;  // an unknown value is warned about at init (core/variables.cc)
}

// Rank 0's settings, on every rank.
Settings rankZerosSettings(Communicator& c) {
  uint64_t values[4] = {
      static_cast<uint64_t>(env::getInt("COIL_PEER_WINDOW_BYTES", 0, int64_t{16} << 30)
                                .value_or(kDefaultSlotBytes)),
      static_cast<uint64_t>(peerMinBytesHere()),
      std::random_device{}() * uint64_t{0x100000001} ^ static_cast<uint64_t>(::getpid()),
      static_cast<uint64_t>(sharingAsked())};
  fromRankZero(c, values, 4);
  return {static_cast<size_t>(values[0] / 4096 * 4096), static_cast<size_t>(values[1]), values[2],
          static_cast<Sharing>(values[3])};
}

// This rank's window, exported, and its mailbox open; or why not.
std::string openOwnWindow(const coilComm* comm, const Settings& settings, PeerWindows* pw,
                          OwnedFd* exported, std::optional<FdMailbox>* mailbox) {
  const int rank = comm->impl->rank();
  try {
    device::setDevice(comm->device);  // a non-blocking init runs on a thread of its own
    std::string why = device::sharedMemoryUnsupported();
    if (!why.empty()) return why;
    pw->mappings[rank] = device::allocShared(2 * settings.slotBytes);
    *exported = device::exportShared(pw->mappings[rank]);
    mailbox->emplace(mailboxName(settings.token, rank));
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

// Sends this rank's descriptor to every peer and maps theirs; or why not.
// Every peer's message is taken even after a failure, so that no sender
// waits for its receipt until the deadline.
std::string mapPeersWindows(coilComm* comm, const Settings& settings, const OwnedFd& exported,
                            FdMailbox& mailbox, PeerWindows* pw) {
  Communicator& c = *comm->impl;
  std::vector<uint64_t> sizes(static_cast<size_t>(c.nranks()));
  sizes[static_cast<size_t>(c.rank())] = pw->mappings[c.rank()].bytes;
  c.allGatherAtSetup(sizes.data(), sizeof(uint64_t));
  const Deadline deadline = Deadline::after(std::min<int64_t>(kExchangeMs, c.options().timeoutMs));
  std::string sendError;
  std::thread sender([&] {
    sendError = sendToEveryPeer(settings.token, c, exported.get(), deadline, &comm->abortFlag);
  });
  std::string why;
  for (int peer = 0; peer < c.nranks(); ++peer) {
    if (peer == c.rank()) continue;
    try {
      std::vector<OwnedFd> fds =
          mailbox.receive(static_cast<uint64_t>(peer), deadline, &comm->abortFlag);
      if (!why.empty()) continue;
      if (fds.size() != 1)
        fail(coilInternalError, "rank ", peer, " sent ", fds.size(), " descriptors, not 1");
      pw->mappings[peer] = device::importShared(fds[0].get(), sizes[peer]);
    } catch (const Error& e) {
      if (why.empty()) why = "mapping rank " + std::to_string(peer) + "'s window: " + e.what();
    }
  }
  sender.join();
  if (why.empty() && !sendError.empty()) why = "sending this rank's window: " + sendError;
  return why;
}

// The cuMem way: every rank's window exported as a descriptor and sent
// over Unix sockets. Empty when every rank mapped every window.
std::string shareByDescriptors(coilComm* comm, const Settings& settings, PeerWindows* pw) {
  Communicator& c = *comm->impl;
  OwnedFd exported;
  std::optional<FdMailbox> mailbox;
  std::string why = openOwnWindow(comm, settings, pw, &exported, &mailbox);
  if (!everyRankAgrees(c, why.empty()))
    return why.empty() ? "another rank cannot export cuMem memory" : why;
  why = mapPeersWindows(comm, settings, exported, *mailbox, pw);
  if (!everyRankAgrees(c, why.empty()))
    return why.empty() ? "another rank could not map every window" : why;
  return {};
}

// One rank's window as the legacy way describes it to the others. Its
// process is named as the init record names it (host hash and pid).
struct IpcRecord {
  uint64_t hostHash;  // localHostHash()
  int64_t pid;
  uint64_t address;   // in that process: a peer that is a thread of it uses it as is
  uint64_t bytes;
  int64_t device;
  device::IpcHandle handle;
};

// The legacy way: every rank's window allocated with cudaMalloc, its IPC
// handle all-gathered over the communicator, and opened by every other
// process (a thread of the same process uses the address). Empty when
// every rank mapped every window.
std::string shareByIpcHandles(coilComm* comm, const Settings& settings, PeerWindows* pw) {
  Communicator& c = *comm->impl;
  const int rank = c.rank();
  IpcRecord mine{localHostHash(), ::getpid(), 0, 0, comm->device, {}};
  std::string why;
  try {
    device::setDevice(comm->device);
    pw->mappings[rank] = device::allocIpc(2 * settings.slotBytes);
    mine.address = reinterpret_cast<uintptr_t>(pw->mappings[rank].ptr);
    mine.bytes = pw->mappings[rank].bytes;
    mine.handle = device::ipcHandleOf(pw->mappings[rank]);
  } catch (const Error& e) {
    why = e.what();
  }
  if (!everyRankAgrees(c, why.empty()))
    return why.empty() ? "another rank cannot make a legacy IPC allocation" : why;
  std::vector<IpcRecord> all(static_cast<size_t>(c.nranks()));
  all[static_cast<size_t>(rank)] = mine;
  c.allGatherAtSetup(all.data(), sizeof(IpcRecord));
  pw->openedElsewhere = c.processSpread().severalProcesses;
  for (int peer = 0; peer < c.nranks() && why.empty(); ++peer) {
    if (peer == rank) continue;
    const IpcRecord& r = all[static_cast<size_t>(peer)];
    if (r.hostHash == mine.hostHash && r.pid == mine.pid) {
      // CUDA cannot open a handle in the process that made it.
      if (r.device != mine.device)
        why = "rank " + std::to_string(peer) + " is a thread of this process on GPU " +
              std::to_string(r.device) + ", not this rank's GPU " + std::to_string(mine.device) +
              ", and legacy IPC cannot map memory within one process";
      else
        pw->mappings[peer] = {reinterpret_cast<void*>(r.address), r.bytes, 0,
                              device::SharedMemory::Kind::kBorrowed};
      continue;
    }
    try {
      pw->mappings[peer] = device::openIpc(r.handle, r.bytes);
    } catch (const Error& e) {
      why = "opening rank " + std::to_string(peer) + "'s window: " + e.what();
    }
  }
  if (!everyRankAgrees(c, why.empty())) {
    // Every process closes what it opened before any rank frees its own
    // window (PeerWindows' destructor, in attachPeerWindows).
    pw->closePeers();
    everyRankAgrees(c, true);
    return why.empty() ? "another rank could not open every window" : why;
  }
  return {};
}

void sayStaged(const std::string& why) {
  COIL_INFO(kInit, "device collectives are staged through host memory: ", why);
}

// Hands the mapped windows to the communicator.
void attach(coilComm* comm, std::unique_ptr<PeerWindows> pw) {
  for (const device::SharedMemory& m : pw->mappings) {
    auto* base = static_cast<uint8_t*>(m.ptr);
    pw->windows.push_back({{base, base + pw->slotBytes}});
  }
  COIL_INFO(kInit, "device collectives of ", pw->minBytes, " bytes and more read the peers' ",
            "device memory (", pw->sharing, ", 2 slots of ", pw->slotBytes, " bytes per rank)");
  comm->peerWindows = std::move(pw);
}

}  // namespace

bool everyRankAgrees(Communicator& c, bool mine) {
  std::vector<int32_t> all(static_cast<size_t>(c.nranks()));
  all[static_cast<size_t>(c.rank())] = mine ? 1 : 0;
  c.allGatherAtSetup(all.data(), sizeof(int32_t));
  return std::all_of(all.begin(), all.end(), [](int32_t yes) { return yes == 1; });
}

size_t peerMinBytesHere() {
  return static_cast<size_t>(
      env::getInt("COIL_PEER_MIN_BYTES", 0, INT64_MAX).value_or(kDefaultMinBytes));
}

void PeerWindows::unmap() noexcept {
  for (device::SharedMemory& m : mappings) device::freeShared(m);
}

void PeerWindows::closePeers() noexcept {
  for (size_t q = 0; q < mappings.size(); ++q)
    if (q != static_cast<size_t>(rank)) device::freeShared(mappings[q]);
}

PeerWindows::~PeerWindows() { unmap(); }

void attachPeerWindows(coilComm* comm) {
  Communicator& c = *comm->impl;
  // The same on every rank, so that every rank takes part in what follows
  // or none does.
  if (c.nranks() < 2 || !c.allOnOneHostWithGpus()) return;
  // Rank 0's settings, so the same on every rank: no need to agree, and
  // every rank takes the same branches below.
  const Settings settings = rankZerosSettings(c);
  if (settings.slotBytes == 0)
    return sayStaged("COIL_PEER_WINDOW_BYTES is below a page (rank 0's)");
  auto pw = std::make_unique<PeerWindows>();
  pw->slotBytes = settings.slotBytes;
  pw->minBytes = settings.minBytes;
  pw->mappings.resize(static_cast<size_t>(c.nranks()));
  pw->rank = c.rank();

  std::string why;
  if (settings.sharing != Sharing::kLegacy) {
    why = shareByDescriptors(comm, settings, pw.get());
    if (why.empty()) {
      pw->sharing = "CUDA IPC, cuMem handles passed as descriptors";
      return attach(comm, std::move(pw));
    }
    pw->unmap();
    if (settings.sharing == Sharing::kCuMem) return sayStaged(why + " (COIL_PEER_IPC=cumem)");
    COIL_INFO(kInit, "peer windows: cuMem descriptors cannot be used (", why,
              "); trying legacy CUDA IPC handles");
  }
  const std::string legacyWhy = shareByIpcHandles(comm, settings, pw.get());
  if (legacyWhy.empty()) {
    pw->sharing = "legacy CUDA IPC handles";
    return attach(comm, std::move(pw));
  }
  sayStaged(why.empty() ? legacyWhy : "cuMem: " + why + "; legacy IPC: " + legacyWhy);
}

bool sendsThroughPeerWindows(const coilComm* comm, const P2pCall& call) {
  const PeerWindows* pw = comm->peerWindows.get();
  if (pw == nullptr) return false;
  const size_t bytes = call.count * reduce::typeSize(call.type);
  return bytes >= std::max<size_t>(pw->minBytes, 1) &&
         algo::deviceWindowP2pPartBytes(static_cast<size_t>(comm->nranks), pw->slotBytes) > 0;
}

bool runsOnPeerWindows(const coilComm* comm, const CollectiveCall& call) {
  using algo::CollKind;
  const PeerWindows* pw = comm->peerWindows.get();
  if (pw == nullptr || call.kind == CollKind::Barrier) return false;
  if (algo::reduces(call.kind) && call.op >= coilNumOps) return false;
  const bool oneBlock = call.kind == CollKind::AllReduce || call.kind == CollKind::Broadcast ||
                        call.kind == CollKind::Reduce;
  const size_t n = static_cast<size_t>(comm->nranks);
  const size_t bytes = call.count * reduce::typeSize(call.type) * (oneBlock ? 1 : n);
  return bytes > 0 && bytes >= pw->minBytes &&
         algo::deviceWindowPieceElems(call.kind, call.type, n, pw->slotBytes) > 0;
}

}  // namespace coil::api
