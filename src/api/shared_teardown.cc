#include "api/shared_teardown.h"

#include <mutex>
#include <string>
#include <vector>

#include "api/handle.h"
#include "api/peer_windows.h"
#include "api/registered_windows.h"
#include "comm/communicator.h"
#include "core/error.h"
#include "core/log.h"

namespace coil::api {
namespace {

// Own windows that could not be freed safely: kept allocated until exit
// (never freed, by design; several threads may destroy at once).
void keepUntilExit(const device::SharedMemory& window) {
  static auto* mutex = new std::mutex();
  static auto* kept = new std::vector<device::SharedMemory>();
  std::lock_guard<std::mutex> lock(*mutex);
  kept->push_back(window);
}

// Empty once every rank has passed the barrier after closing what it
// opened; else why that is not known.
std::string everyRankClosed(coilComm* comm, bool threadsAmongProcesses) {
  if (threadsAmongProcesses)
    return "its ranks are threads of several processes, and a thread may destroy its ranks in "
           "turn, so destroy cannot wait for the others to close it";
  if (comm->abortFlag.load()) return "the communicator was aborted: no rank can confirm it closed it";
  if (!comm->impl) return "the communicator never finished its init";
  if (comm->impl->asyncError() != coilSuccess)
    return "the communicator is broken: no rank can confirm it closed it";
  try {
    comm->impl->barrier();
    return {};
  } catch (const Error& e) {
    return std::string("not every rank could confirm that it closed it: ") + e.what();
  }
}

}  // namespace

void releaseSharedDeviceMemory(coilComm* comm) noexcept {
  PeerWindows* pw = comm->peerWindows.get();
  // Both the same on every rank (a process that opens a peer's memory has
  // its own opened in turn; windows are registered and deregistered
  // together), so every rank takes the barrier below or none does.
  const bool windowOpenedElsewhere = pw != nullptr && pw->openedElsewhere;
  bool buffersOpenedElsewhere = false;
  if (comm->windows)
    for (const auto& w : comm->windows->live) buffersOpenedElsewhere |= !w->opened.empty();
  const bool mixed = comm->impl && comm->impl->processSpread().threadsAmongProcesses;

  if (pw != nullptr) pw->closePeers();
  comm->windows.reset();  // closes what they opened; the buffers are the application's
  if (!windowOpenedElsewhere && !buffersOpenedElsewhere) {
    comm->peerWindows.reset();
    return;
  }
  const std::string why = everyRankClosed(comm, mixed);
  if (why.empty()) {
    comm->peerWindows.reset();
    return;
  }
  if (windowOpenedElsewhere) {
    device::SharedMemory& own = pw->mappings[static_cast<size_t>(pw->rank)];
    COIL_WARN(kInit, "rank ", comm->rank, ": destroy leaves this rank's peer window (", own.bytes,
              " bytes of device memory) allocated until the process exits, since CUDA's legacy ",
              "IPC forbids freeing it before every process that opened it closed it, and ", why,
              " (peer windows shared as cuMem descriptors need none of this)");
    keepUntilExit(own);
    own = device::SharedMemory{};
  }
  if (buffersOpenedElsewhere)
    COIL_WARN(kInit, "rank ", comm->rank, ": destroyed with windows still registered that ",
              "other processes opened, and ", why, ": free their buffers only once those ",
              "processes have destroyed this communicator or exited (CUDA's legacy IPC leaves ",
              "freeing memory another process still has open undefined); ",
              "coilCommWindowDeregister before destroy avoids this");
  comm->peerWindows.reset();
}

}  // namespace coil::api
