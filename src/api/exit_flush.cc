#include "api/exit_flush.h"

#include <stdlib.h>

#include <mutex>
#include <string>

#include "api/handle_registry.h"
#include "core/log.h"

namespace coil::api {
namespace {

void flushAtExit() noexcept {
  try {
    const auto until = std::chrono::steady_clock::now() + kExitWait;
    // Not the handles a forked child inherited: the registry holds those
    // as inherited, not live (handle_registry.cc).
    forEachLive([&](coilComm* comm) {
      if (comm->initState.load() != coilSuccess || !comm->impl || comm->abortFlag.load())
        return;
      const std::vector<int> left = comm->impl->waitUntilSent(until);
      if (left.empty()) return;
      std::string ranks;
      for (int q : left) ranks += (ranks.empty() ? "" : ", ") + std::to_string(q);
      COIL_WARN(kInit, "exit without coilCommDestroy: data queued for rank(s) ", ranks,
                " of communicator rank ", comm->rank, " did not leave within ",
                kExitWait.count(), " ms and is lost; those ranks will fail");
    });
  } catch (...) {
    // Exiting anyway: nothing to report to.
  }
}

}  // namespace

void armExitFlush() {
  static std::once_flag armed;
  std::call_once(armed, [] { std::atexit(flushAtExit); });
}

}  // namespace coil::api
