#include "api/registered_windows.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "api/device_calls.h"
#include "api/guard.h"
#include "comm/host_identity.h"
#include "core/log.h"
#include "device/device_reduce.h"

namespace coil::api {
namespace {

// The peers' allocations this process has opened, each once: CUDA maps an
// allocation once per process (a second cudaIpcOpenMemHandle of it fails),
// and two windows, or two communicators, may name the same one.
class OpenedAllocations {
 public:
  static OpenedAllocations& instance() {
    static auto* opened = new OpenedAllocations();  // never destroyed: windows may outlive main
    return *opened;
  }

  const uint8_t* acquire(const device::IpcHandle& handle, size_t bytes, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = open_.find({handle.bytes, device});
    if (it == open_.end())
      it = open_.emplace(Key{handle.bytes, device}, Entry{device::openIpc(handle, bytes), 0}).first;
    ++it->second.refs;
    return static_cast<const uint8_t*>(it->second.memory.ptr);
  }

  void release(const device::IpcHandle& handle, int device) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = open_.find({handle.bytes, device});
    if (it == open_.end() || --it->second.refs > 0) return;
    device::freeShared(it->second.memory);
    open_.erase(it);
  }

 private:
  using Key = std::pair<std::array<uint8_t, 64>, int>;
  struct Entry {
    device::SharedMemory memory;
    int refs;
  };
  std::mutex mutex_;
  std::map<Key, Entry> open_;
};

// One rank's buffer as registration describes it to the others. Its
// process is named as the init record names it (host hash and pid).
struct WindowRecord {
  enum State : int32_t { kExported, kRefused, kNotExported };
  uint64_t hostHash;
  int64_t pid;
  uint64_t address;  // in that process: a peer that is a thread of it uses it as is
  uint64_t bytes;
  uint64_t offset;           // of the buffer in its allocation
  uint64_t allocationBytes;  // the whole allocation's, for openIpc
  uint64_t minBytes;         // COIL_PEER_MIN_BYTES there (rank 0's counts)
  int32_t device;
  State state;
  device::IpcHandle handle;
};

// Why this rank refuses the call (empty: it does not). Checked before the
// collective part, and said to the peers by the record, so that no rank
// waits for one that gave up.
std::string refusalOf(const coilComm* comm, const void* buff, size_t size, int flags,
                      coilWindow* const* win) {
  if (win == nullptr) return "win is NULL";
  if ((flags & ~COIL_WIN_COLL_SYMMETRIC) != 0)
    return "winFlags " + std::to_string(flags) + " has bits other than COIL_WIN_COLL_SYMMETRIC";
  if (buff == nullptr) return "buff is NULL";
  if (size == 0) return "size is 0";
  if (!comm->staged)
    return "a window is device memory, and this communicator has no CUDA device (" +
           device::unavailableReason() + ")";
  const auto* last = static_cast<const uint8_t*>(buff) + (size - 1);
  if (device::kindOf(buff) != device::MemKind::kDevice ||
      device::kindOf(last) != device::MemKind::kDevice)
    return "[buff, buff + size) is not device memory; a window is a buffer from coilMemAlloc or "
           "cudaMalloc";
  return {};
}

// Maps every peer's buffer into `w`; or says why it could not.
std::string mapPeers(const coilComm* comm, const std::vector<WindowRecord>& all, coilWindow* w) {
  const int rank = comm->impl->rank();
  const WindowRecord& mine = all[static_cast<size_t>(rank)];
  w->byRank.assign(all.size(), nullptr);
  w->byRank[static_cast<size_t>(rank)] = w->base;
  for (size_t peer = 0; peer < all.size(); ++peer) {
    if (peer == static_cast<size_t>(rank)) continue;
    const WindowRecord& r = all[peer];
    if (r.hostHash == mine.hostHash && r.pid == mine.pid) {
      if (r.device != mine.device)
        return "rank " + std::to_string(peer) + " is a thread of this process on GPU " +
               std::to_string(r.device) + ", not this rank's GPU " + std::to_string(mine.device);
      w->byRank[peer] = reinterpret_cast<const uint8_t*>(r.address);
      continue;
    }
    try {
      const uint8_t* base = OpenedAllocations::instance().acquire(r.handle, r.allocationBytes,
                                                                  comm->device);
      w->opened.push_back(r.handle);
      w->byRank[peer] = base + r.offset;
    } catch (const Error& e) {
      return "opening rank " + std::to_string(peer) + "'s buffer: " + e.what();
    }
  }
  return {};
}

void unmap(coilWindow* w) noexcept {
  for (const device::IpcHandle& h : w->opened) OpenedAllocations::instance().release(h, w->device);
  w->opened.clear();
  w->byRank.clear();
}

}  // namespace

void registerWindow(coilComm* comm, void* buff, size_t size, int flags, coilWindow** win) {
  Communicator& c = readyForHostCall(comm);  // after the device calls queued before it
  const int rank = c.rank();
  const bool mappable = c.nranks() > 1 && c.allOnOneHostWithGpus() && comm->staged;

  WindowRecord mine{};
  mine.hostHash = localHostHash();
  mine.pid = ::getpid();
  mine.address = reinterpret_cast<uintptr_t>(buff);
  mine.bytes = size;
  mine.minBytes = peerMinBytesHere();
  mine.device = comm->device;
  const std::string refusal = refusalOf(comm, buff, size, flags, win);
  std::string exportWhy;
  mine.state = refusal.empty() ? WindowRecord::kExported : WindowRecord::kRefused;
  if (mine.state == WindowRecord::kExported && mappable) {
    try {
      device::setDevice(comm->device);
      const device::IpcRange range = device::ipcRangeOf(buff, size);
      mine.handle = range.handle;
      mine.offset = range.offset;
      mine.allocationBytes = range.allocationBytes;
    } catch (const Error& e) {
      exportWhy = e.what();
      mine.state = WindowRecord::kNotExported;
    }
  }
  std::vector<WindowRecord> all(static_cast<size_t>(c.nranks()));
  c.collective({algo::CollKind::AllGather, &mine, all.data(), sizeof(WindowRecord), coilUint8,
                coilSum, 0});

  if (!refusal.empty()) fail(coilInvalidArgument, refusal);
  for (size_t q = 0; q < all.size(); ++q)
    if (all[q].state == WindowRecord::kRefused)
      fail(coilInvalidArgument, "rank ", q, " refused its buffer (its coilGetLastError says ",
           "why); no window was registered");
  for (size_t q = 0; q < all.size(); ++q)
    if (all[q].bytes != size)
      fail(coilInvalidArgument, "the ranks' windows differ in size (", size, " bytes here, ",
           all[q].bytes, " on rank ", q, "); a window has one size on every rank");

  if (!comm->windows) comm->windows = std::make_unique<RegisteredWindows>();
  RegisteredWindows& rw = *comm->windows;
  rw.minBytes = all[0].minBytes;
  auto w = std::make_unique<coilWindow>();
  w->id = rw.nextId++;
  w->base = static_cast<uint8_t*>(buff);
  w->bytes = size;
  w->device = comm->device;

  // The same branches on every rank: `mappable` and the states are.
  std::string why;
  if (!mappable) {
    why = c.nranks() == 1 ? "one rank" : "the ranks are not all GPUs of one host";
  } else {
    for (size_t q = 0; q < all.size() && why.empty(); ++q)
      if (all[q].state == WindowRecord::kNotExported)
        why = q == static_cast<size_t>(rank)
                  ? "its buffer cannot be exported: " + exportWhy
                  : "rank " + std::to_string(q) + " cannot export its buffer for CUDA IPC";
    if (why.empty()) {
      why = mapPeers(comm, all, w.get());
      if (!everyRankAgrees(c, why.empty()) && why.empty())
        why = "another rank could not map every buffer";
    }
  }
  if (why.empty()) {
    COIL_INFO(kInit, "window #", w->id, " (", size, " bytes): calls of ", rw.minBytes,
              " bytes and more on it read the peers' buffers in place");
  } else {
    unmap(w.get());
    COIL_INFO(kInit, "window #", w->id, " (", size, " bytes) is registered but not mapped (",
              why, "): calls on it take the other device paths");
  }
  *win = w.get();
  rw.live.push_back(std::move(w));
}

void deregisterWindow(coilComm* comm, coilWindow* win) {
  Communicator& c = readyForHostCall(comm);
  RegisteredWindows* rw = comm->windows.get();
  auto it = rw ? std::find_if(rw->live.begin(), rw->live.end(),
                              [win](const auto& w) { return w.get() == win; })
               : decltype(rw->live.begin()){};
  const bool known = rw != nullptr && it != rw->live.end();
  // Also the barrier after which no peer reads this rank's buffer: each
  // rank waited above for its own calls, the last of which ended with a
  // barrier after its reads.
  uint64_t mineId = known ? win->id : 0;
  std::vector<uint64_t> ids(static_cast<size_t>(c.nranks()));
  c.collective({algo::CollKind::AllGather, &mineId, ids.data(), 1, coilUint64, coilSum, 0});
  if (!known)
    fail(coilInvalidArgument, "win ", static_cast<void*>(win),
         " is not a window of this communicator (registered on it and not yet deregistered)");
  for (size_t q = 0; q < ids.size(); ++q)
    if (ids[q] != mineId)
      fail(coilInvalidUsage, "the ranks deregistered different windows (#", mineId, " here, #",
           ids[q], " on rank ", q, "; #0: not a window of its own); every rank deregisters its ",
           "windows in the same order");
  const bool opened = !win->opened.empty();  // the same on every rank, as in shared_teardown.cc
  rw->live.erase(it);
  // The application may free its buffer once this returns, and CUDA's
  // legacy IPC leaves freeing memory that another process still has open
  // undefined: every process closes what it opened before any rank returns.
  if (opened) c.barrier();
}

std::optional<RegisteredCall> registeredCallOf(const coilComm* comm, const CollectiveCall& call,
                                               const CallBuffers& use) {
  const RegisteredWindows* rw = comm->windows.get();
  // More ranks than one chain launch reads: a rank reducing in place could
  // not be its own term (device_reduce.h), and whether a rank calls in
  // place is its own choice, so no rank of such a communicator takes this
  // path (the same answer everywhere).
  if (comm->nranks > device::kChainSourcesPerLaunch) return std::nullopt;
  if (rw == nullptr || rw->live.empty()) return std::nullopt;
  // Which buffers the peers read: an all-reduce both, an all-gather and a
  // broadcast the outputs (the root places its input in its output), the
  // others the inputs. Every rank decides alone and must decide alike, at
  // the same place in its window: so never on a buffer only the root
  // passes (a scatter's input), nor on a gather's inputs (the root's, in
  // place, is its block of its output).
  bool readsInput = false, readsOutput = false;
  switch (call.kind) {
    case algo::CollKind::AllReduce: readsInput = readsOutput = true; break;
    case algo::CollKind::AllGather:
    case algo::CollKind::Broadcast: readsOutput = true; break;
    case algo::CollKind::ReduceScatter:
    case algo::CollKind::Reduce:
    case algo::CollKind::AllToAll: readsInput = true; break;
    default: return std::nullopt;
  }
  if (algo::reduces(call.kind) && call.op >= coilNumOps) return std::nullopt;
  // The size of what the peers read, which every rank's call gives alike
  // (not the larger buffer: a reduce's root passes an output, the others
  // none).
  const size_t readBytes = readsInput ? use.sendBytes : use.recvBytes;
  if (readBytes < std::max<size_t>(rw->minBytes, 1)) return std::nullopt;
  RegisteredCall found{nullptr, 0, nullptr, 0};
  for (const auto& w : rw->live) {
    if (!w->mapped()) continue;
    if (readsInput && found.send == nullptr)
      if (auto at = w->offsetOf(use.send, use.sendBytes)) found.send = w.get(), found.sendOffset = *at;
    if (readsOutput && found.recv == nullptr)
      if (auto at = w->offsetOf(use.recv, use.recvBytes)) found.recv = w.get(), found.recvOffset = *at;
  }
  if ((readsInput && found.send == nullptr) || (readsOutput && found.recv == nullptr))
    return std::nullopt;
  return found;
}

}  // namespace coil::api

coilWindow::~coilWindow() { coil::api::unmap(this); }

std::optional<size_t> coilWindow::offsetOf(const void* p, size_t n) const {
  const auto at = reinterpret_cast<uintptr_t>(p), start = reinterpret_cast<uintptr_t>(base);
  if (at < start || at - start > bytes || n > bytes - (at - start)) return std::nullopt;
  return at - start;
}
