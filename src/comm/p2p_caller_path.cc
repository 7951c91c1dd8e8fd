#include "comm/p2p_caller_path.h"

#include <algorithm>

#include "algorithms/caller_io_wait.h"
#include "core/error.h"

namespace coil {

bool moveOnCallerPath(P2pTask& t) {
  transport::CallerIo& io = *t.callerIo;
  bool moved = false;
  if (!t.begun) {
    // The previous message on this path, in this batch or an earlier call,
    // is complete: tasks on one peer and direction run one after another,
    // and every call drains its sends before it returns.
    if (t.call.isSend && !io.sendComplete()) {
      moved = io.advance();
      if (!io.sendComplete()) return moved;
    }
    const size_t n = std::min(t.piece, t.bytes - t.done);
    // (An empty message's buffer may be NULL, as NCCL allows; the path
    // still needs somewhere to complete an empty receive.)
    static uint8_t emptyTarget;
    auto* at =
        t.call.buffer != nullptr ? static_cast<uint8_t*>(t.call.buffer) + t.done : &emptyTarget;
    if (t.call.isSend) io.beginSend(at, n, t.tag);
    else io.beginRecv(at, n, t.tag);
    t.inFlight = n;
    t.begun = moved = true;
  }
  moved |= io.advance();
  if (!io.failure().empty()) fail(coilRemoteError, describe(t), ": ", io.failure());
  size_t got = 0;
  uint64_t tag = 0;
  if (t.call.isSend ? !io.sendComplete() : !io.recvComplete(&got, &tag)) return moved;
  if (!t.call.isSend)
    algo::checkMessage([&] { return describe(t); }, t.call.peer, tag, t.tag, got, t.inFlight);
  t.done += t.inFlight;
  t.begun = false;
  t.started = true;
  return true;
}

bool awaitCallerPaths(const std::vector<P2pTask>& tasks, int ms) {
  std::vector<transport::CallerIo*> group;
  for (const P2pTask& t : tasks) {
    if (t.finished() || (t.after >= 0 && !tasks[t.after].finished())) continue;
    if (t.callerIo == nullptr) return false;
    if (std::find(group.begin(), group.end(), t.callerIo) == group.end())
      group.push_back(t.callerIo);
  }
  if (group.empty()) return false;
  group.front()->awaitAny(group, ms);
  return true;
}

}  // namespace coil
