// Point-to-point: coilSend/coilRecv, alone or as a group.
//
// All operations of a batch progress together: each pass over the batch
// moves whatever can move without waiting (a free slot to send into, a
// filled slot to read, room in a socket, bytes arrived). Each message moves
// on one of three paths (p2p_task.h): the FIFO slots, zero-copy between
// registered buffers, or the caller-driven path where the peer's connection
// has one (p2p_caller_path.h). Only when a whole pass moves nothing does the
// thread back off (spin, then yield, then short sleeps, or a sleep in poll()
// when every waiting message is on a caller-driven path). So any set of sends
// and receives that matches up completes, in whatever order ranks listed
// them: the classic "everyone sends first" ring cannot deadlock.
//
// Sends and receives between two ranks match in order. Each direction of
// each pair keeps its own sequence number, stamped on every slot, so a
// count mismatch is reported rather than silently misread. Operations of a
// batch on the same (peer, direction) share one FIFO (or caller-driven
// path), so they go through it one after another, in the order they were
// issued: a second receive from a peer must not peek at a slot of the
// first (torch's batch_isend_irecv of a two-rank ring puts two sends and
// two receives on one peer).
//
// An empty message is still a message: it moves one empty slot, stamped
// like the others. So the message after it waits for the one before it
// (it does not start beside it, as when an empty message counted as done
// before it began), and a receiver that expects something other than
// nothing learns at this call that the counts differ.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>

#include "algorithms/failure_notice.h"
#include "algorithms/fingerprint.h"
#include "comm/communicator.h"
#include "comm/p2p_caller_path.h"
#include "comm/p2p_task.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rank_list.h"
#include "reduce/reduce.h"
#include "transports/direct_io.h"

namespace coil {

void* Communicator::registerBuffer(void* buffer, size_t bytes) {
  checkUsable();
  if (buffer == nullptr && bytes != 0) fail(coilInvalidArgument, "buffer is NULL");
  auto r = std::make_unique<Registration>(Registration{buffer, bytes, {}});
  try {
    for (transport::Connection* c : peers_)
      if (c != nullptr && c->directIo() != nullptr && bytes != 0) {
        c->directIo()->registerBuffer(buffer, bytes);
        r->paths.push_back(c->directIo());
      }
  } catch (...) {
    for (transport::DirectIo* io : r->paths) io->deregisterBuffer(buffer, bytes);
    throw;
  }
  registrations_.push_back(std::move(r));
  return registrations_.back().get();
}

void Communicator::deregisterBuffer(void* handle) {
  auto it = std::find_if(registrations_.begin(), registrations_.end(),
                         [&](const auto& r) { return r.get() == handle; });
  if (it == registrations_.end())
    fail(coilInvalidArgument, "handle ", handle,
         " is not a registration of this communicator (deregistered twice, or another's)");
  for (transport::DirectIo* io : (*it)->paths) io->deregisterBuffer((*it)->buffer, (*it)->bytes);
  registrations_.erase(it);
}

size_t Communicator::callerPieceBytes(transport::Connection& conn, P2pPath path) const {
  // Where every rank has such a path to every peer, the model's piece for
  // messages: the path's largest, unless COIL_TUNE's caller= sets it for
  // point-to-point as for the collectives (caller=0 keeps both on the
  // FIFOs). Elsewhere (shm inside each host, tcp across) each pair whose
  // connection has one uses its largest message (tcp's express sockets
  // exist at both ends of a tcp connection), and so do the collectives
  // unless caller=0 keeps them on the FIFOs.
  if (callerIoBytes_ != 0) return model_.messagePieceBytes();
  if (path == P2pPath::kCollectives && !model_.mixedCallerPaths()) return 0;
  const transport::CallerIo* io = conn.callerIo();
  return io != nullptr ? io->callerIoMaxBytes() : 0;
}

void Communicator::pointToPoint(const std::vector<P2pCall>& calls, P2pPath path) {
  checkUsable();
  std::vector<P2pTask> tasks;
  std::deque<P2pTask*> selfSends, selfRecvs;
  const Deadline deadline = deadline_.forCall(options_.timeoutMs);
  const int64_t startMs = deadline_.calledAtMs();  // the recorder's start time
  FlightRecorder::Batch record(flight_);
  size_t onCallerPaths = 0;
  for (const P2pCall& c : calls) {
    P2pTask t;
    t.call = c;
    t.bytes = c.count * reduce::typeSize(c.type);
    uint32_t seq = c.isSend ? sendSeq_[c.peer]++ : recvSeq_[c.peer]++;
    record.add(c.isSend, seq, c.count, c.type, c.peer, startMs);
    t.tag = algo::Fingerprint{seq + seqSalt_, algo::CollKind::SendRecv, c.type, coilSum, c.count}
                .encode();
    t.conn = peers_[c.peer];
    if (t.conn != nullptr && t.conn->directIo() != nullptr &&
        t.bytes >= t.conn->directIo()->directFromBytes()) {
      t.direct = t.conn->directIo();
      t.useDirect = c.isSend && t.direct->registered(c.buffer, t.bytes);
    } else if (t.conn != nullptr) {
      t.piece = callerPieceBytes(*t.conn, path);
      if (t.piece != 0) {
        t.callerIo = t.conn->callerIo();
        ++onCallerPaths;
      }
    }
    for (int i = static_cast<int>(tasks.size()) - 1; i >= 0; --i)
      if (tasks[i].call.peer == c.peer && tasks[i].call.isSend == c.isSend) {
        t.after = i;
        break;
      }
    tasks.push_back(t);
  }
  if (log::enabled(log::Level::Info, log::kColl))
    COIL_INFO(kColl, "point-to-point: ", tasks.size(), " operation(s), ", onCallerPaths,
              " on the caller-driven paths");
  // A rank sending to itself: pair its sends and receives in order and copy.
  for (P2pTask& t : tasks)
    if (t.call.peer == rank_) (t.call.isSend ? selfSends : selfRecvs).push_back(&t);
  if (selfSends.size() != selfRecvs.size())
    fail(coilInvalidUsage, "a group sends ", selfSends.size(), " message(s) to this rank (", rank_,
         ") but receives ", selfRecvs.size(), " from it");
  for (size_t i = 0; i < selfSends.size(); ++i) {
    P2pTask* s = selfSends[i];
    P2pTask* r = selfRecvs[i];
    if (s->bytes != r->bytes)
      fail(coilInvalidUsage, "send to self of ", s->bytes, " bytes matched with a receive of ",
           r->bytes, " bytes");
    if (s->bytes) std::memmove(r->call.buffer, s->call.buffer, s->bytes);
    s->done = s->bytes;
    r->done = r->bytes;
    s->started = r->started = true;
  }

  const size_t slice = sliceBytes_;
  try {
    LinkClaim claim(*this);
    int idle = 0;
    bool peerGoneSeen = false;
    for (;;) {
      bool moved = false, pending = false;
      for (P2pTask& t : tasks) {
        if (t.finished()) continue;
        pending = true;
        if (t.after >= 0 && !tasks[t.after].finished()) continue;
        if (t.callerIo != nullptr) {
          moved |= moveOnCallerPath(t);
          continue;
        }
        if (t.direct != nullptr && !t.announced) {
          struct Announcement {
            uint64_t bytes;
            uint64_t direct;
          } a{t.bytes, t.useDirect ? 1u : 0u};
          if (t.call.isSend) {
            void* slot = t.conn->sendFifo().tryAcquire();
            if (!slot) continue;
            std::memcpy(slot, &a, sizeof a);
            t.conn->sendFifo().publish(sizeof a, t.tag);
          } else {
            transport::RecvSlot in;
            if (!t.conn->recvFifo().tryPeek(&in)) continue;
            if (in.tag != t.tag) algo::failForeignSlot(describe(t), t.call.peer, in, t.tag);
            const bool isAnnouncement = in.bytes == sizeof a;
            if (isAnnouncement) std::memcpy(&a, in.data, sizeof a);
            if (!isAnnouncement || a.bytes != t.bytes)
              fail(coilInvalidUsage, describe(t), ": rank ", t.call.peer, " sends ",
                   isAnnouncement ? a.bytes : in.bytes, isAnnouncement ? " bytes" : " bytes in a slot",
                   " where ", t.bytes, " were expected: the counts differ");
            t.useDirect = a.direct != 0;
            t.conn->recvFifo().release();
          }
          t.conn->kick();
          t.announced = moved = true;
          continue;
        }
        if (t.useDirect) {
          if (!t.posted) {
            t.ticket = t.call.isSend ? t.direct->postSend(t.call.buffer, t.bytes, t.tag)
                                     : t.direct->postRecv(t.call.buffer, t.bytes, t.tag);
            t.posted = moved = true;
          } else if (t.direct->done(t.ticket)) {
            const std::string why = t.direct->failure();
            if (!why.empty()) fail(coilRemoteError, describe(t), ": ", why);
            t.done = t.bytes;
            t.started = moved = true;
          }
          continue;
        }
        // (An empty message's buffer may be NULL, as NCCL allows: no copy.)
        auto* base = static_cast<uint8_t*>(t.call.buffer) + t.done;
        const size_t n = std::min(slice, t.bytes - t.done);
        if (t.call.isSend) {
          void* slot = t.conn->sendFifo().tryAcquire();
          if (!slot) continue;
          if (n != 0) std::memcpy(slot, base, n);
          t.conn->sendFifo().publish(static_cast<uint32_t>(n), t.tag);
          t.conn->kick();
        } else {
          transport::RecvSlot in;
          if (!t.conn->recvFifo().tryPeek(&in)) continue;
          if (in.tag != t.tag) algo::failForeignSlot(describe(t), t.call.peer, in, t.tag);
          if (in.bytes != n)
            fail(coilInvalidUsage, describe(t), ": rank ", t.call.peer, " sent a slice of ",
                 in.bytes, " bytes where ", n, " were expected: the counts differ");
          if (n != 0) std::memcpy(base, in.data, n);
          t.conn->recvFifo().release();
          t.conn->kick();
        }
        t.done += n;
        t.started = moved = true;
      }
      if (!pending) {
        record.complete();
        return;
      }
      if (moved) {
        idle = 0;
        peerGoneSeen = false;
        continue;
      }
      // Nothing could move: check for failures, then back off.
      if (revokedOrAborted()) fail(coilRemoteError, "point-to-point: communicator aborted");
      for (const P2pTask& t : tasks) {
        // (A caller-driven path reports a closed peer itself.)
        if (t.finished() || t.callerIo != nullptr) continue;
        const bool gone = t.call.isSend ? t.conn->sendFifo().consumerGone().has_value()
                                        : t.conn->recvFifo().producerGone().has_value();
        // A peer may publish its last slot and exit between our pass and
        // this check: fail only if one more full pass also moves nothing.
        if (gone) {
          if (peerGoneSeen)
            fail(coilRemoteError, describe(t), ": rank ", t.call.peer,
                 " closed its connection or died");
          peerGoneSeen = true;
          break;
        }
      }
      if (deadline.expired()) {
        // Every operation still pending, and the ranks it waits for.
        std::string pending;
        std::vector<int> waitingFor;
        for (const P2pTask& t : tasks) {
          if (t.finished()) continue;
          pending += (pending.empty() ? "" : "; ") + describe(t);
          if (std::find(waitingFor.begin(), waitingFor.end(), t.call.peer) == waitingFor.end())
            waitingFor.push_back(t.call.peer);
        }
        std::sort(waitingFor.begin(), waitingFor.end());
        fail(coilTimeout, "point-to-point: timed out after ", options_.timeoutMs, " ms waiting for ",
             rankList(waitingFor), "; pending: ", pending);
      }
      ++idle;
      if (idle < 64) continue;
      if (idle < 128) {
        sched_yield();
      } else if (!awaitCallerPaths(tasks, std::clamp(deadline.remainingMs(), 1, kWaitSliceMs))) {
        std::this_thread::sleep_for(std::chrono::microseconds(idle < 1024 ? 20 : 200));
      }
    }
  } catch (const Error& e) {
    record.fail([&](size_t i) { return tasks[i].finished(); });
    breakWith(e);
  }
}

}  // namespace coil
