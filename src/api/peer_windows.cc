#include "api/peer_windows.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "api/handle.h"
#include "core/env.h"
#include "core/log.h"
#include "net/fd_passing.h"

namespace coil::api {
namespace {

constexpr int64_t kDefaultSlotBytes = int64_t{32} << 20;
// Below this a device all-reduce is staged through host memory: one
// handover between the GPU and the host instead of three.
constexpr int64_t kDefaultMinBytes = int64_t{256} << 10;
// The descriptor exchange is local to the host; a rank that has not sent
// its own by then is stuck or gone.
constexpr int64_t kExchangeMs = 60'000;

bool everyRankAgrees(Communicator& c, bool mine) {
  int32_t yes = mine ? 1 : 0, all = 0;
  c.collective({algo::CollKind::AllReduce, &yes, &all, 1, coilInt32, coilMin, 0});
  return all == 1;
}

// Rank 0's values, on every rank: settings the ranks must share.
void fromRankZero(Communicator& c, uint64_t* values, size_t count) {
  std::vector<uint64_t> out(count);
  c.collective({algo::CollKind::Broadcast, values, out.data(), count, coilUint64, coilSum, 0});
  std::copy(out.begin(), out.end(), values);
}

std::string mailboxName(uint64_t token, int rank) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(token));
  return std::string("peer-window-") + hex + "-" + std::to_string(rank);
}

// Sends this rank's descriptor to every other rank, while the caller
// receives theirs (a send waits for its receipt, so one thread could not
// do both in any order that suits every rank).
std::string sendToEveryPeer(uint64_t token, const Communicator& c, int fd, const Deadline& deadline,
                            const std::atomic<bool>* abortFlag) {
  try {
    for (int peer = 0; peer < c.nranks(); ++peer)
      if (peer != c.rank())
        FdMailbox::send(mailboxName(token, peer), static_cast<uint64_t>(c.rank()),
                        std::span<const int>(&fd, 1), deadline, abortFlag);
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

struct Settings {
  size_t slotBytes;
  size_t minBytes;
  uint64_t token;  // names this communicator's mailboxes on the host
};

// Rank 0's settings, on every rank.
Settings rankZerosSettings(Communicator& c) {
  uint64_t values[3] = {
      static_cast<uint64_t>(env::getInt("COIL_PEER_WINDOW_BYTES", 0, int64_t{16} << 30)
                                .value_or(kDefaultSlotBytes)),
      static_cast<uint64_t>(
          env::getInt("COIL_PEER_MIN_BYTES", 0, INT64_MAX).value_or(kDefaultMinBytes)),
      std::random_device{}() * uint64_t{0x100000001} ^ static_cast<uint64_t>(::getpid())};
  fromRankZero(c, values, 3);
  return {static_cast<size_t>(values[0] / 4096 * 4096), static_cast<size_t>(values[1]), values[2]};
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
  uint64_t mySize = pw->mappings[c.rank()].bytes;
  c.collective({algo::CollKind::AllGather, &mySize, sizes.data(), 1, coilUint64, coilSum, 0});
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

void sayStaged(const std::string& why) {
  COIL_INFO(kInit, "device all-reduces are staged through host memory: ",
            why.empty() ? std::string("another rank cannot share device memory") : why);
}

}  // namespace

PeerWindows::~PeerWindows() {
  for (device::SharedMemory& m : mappings) device::freeShared(m);
}

void attachPeerWindows(coilComm* comm) {
  Communicator& c = *comm->impl;
  // The same on every rank, so that every rank takes part in what follows
  // or none does.
  if (c.nranks() < 2 || !c.allOnOneHostWithGpus()) return;
  const Settings settings = rankZerosSettings(c);
  // Rank 0's setting, so the same on every rank: no need to agree.
  if (settings.slotBytes == 0)
    return sayStaged("COIL_PEER_WINDOW_BYTES is below a page (rank 0's)");
  auto pw = std::make_unique<PeerWindows>();
  pw->slotBytes = settings.slotBytes;
  pw->minBytes = settings.minBytes;
  pw->mappings.resize(static_cast<size_t>(c.nranks()));

  OwnedFd exported;
  std::optional<FdMailbox> mailbox;
  std::string why = openOwnWindow(comm, settings, pw.get(), &exported, &mailbox);
  if (!everyRankAgrees(c, why.empty())) return sayStaged(why);
  why = mapPeersWindows(comm, settings, exported, *mailbox, pw.get());
  if (!everyRankAgrees(c, why.empty())) return sayStaged(why);

  for (const device::SharedMemory& m : pw->mappings) {
    auto* base = static_cast<uint8_t*>(m.ptr);
    pw->windows.push_back({{base, base + pw->slotBytes}});
  }
  COIL_INFO(kInit, "device all-reduces of ", pw->minBytes, " bytes and more read the peers' ",
            "device memory (CUDA IPC, 2 slots of ", pw->slotBytes, " bytes per rank)");
  comm->peerWindows = std::move(pw);
}

bool runsOnPeerWindows(const coilComm* comm, const CollectiveCall& call, size_t bytes) {
  return comm->peerWindows && call.kind == algo::CollKind::AllReduce && call.op < coilNumOps &&
         bytes > 0 && bytes >= comm->peerWindows->minBytes;
}

}  // namespace coil::api
