#include "transports/tcp/tcp_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "transports/tcp/tcp_express.h"

namespace coil::transport::tcp {

namespace {

constexpr size_t kHeaderBytes = sizeof(FrameHeader);
constexpr size_t kDataAlignment = 4096;

std::string errnoText(int err) { return std::strerror(err); }

}  // namespace

FifoMemory::FifoMemory(uint32_t slotCount, uint32_t slotBytes)
    : control_(std::make_unique<FifoControl>()) {
  control_->init(slotCount, slotBytes);
  // Both ends of a tcp FIFO are this process (executor and proxy thread);
  // processGone() ignores our own pid, so these never trigger PeerDied.
  control_->producerPid = static_cast<int32_t>(getpid());
  control_->consumerPid = control_->producerPid;
  size_t bytes = fifoDataBytes(slotCount, slotBytes);
  size_t rounded = (bytes + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
  if (rounded == 0) rounded = kDataAlignment;
  data_.reset(static_cast<uint8_t*>(std::aligned_alloc(kDataAlignment, rounded)));
  if (!data_) fail(coilSystemError, "tcp: cannot allocate ", rounded, " bytes for FIFO slots");
}

uint8_t* FifoMemory::slot(uint32_t index) const {
  return data_.get() + static_cast<size_t>(index) * control_->slotBytes;
}

TcpChannel::TcpChannel(int peer, std::vector<Socket> sockets, uint32_t slotCount,
                       uint32_t slotBytes, std::shared_ptr<ProxyWaker> waker, Socket express)
    : peer_(peer),
      slotCount_(slotCount),
      slotBytes_(slotBytes),
      sendMem_(slotCount, slotBytes),
      recvMem_(slotCount, slotBytes),
      sendFifo_(sendMem_.view()),
      recvFifo_(recvMem_.view()),
      waker_(std::move(waker)) {
  if (sockets.empty() || sockets.size() > slotCount)
    coil::fail(coilInternalError, "tcp: ", sockets.size(), " sockets for ", slotCount, " slots");
  sockets_.reserve(sockets.size());
  for (size_t i = 0; i < sockets.size(); ++i) {
    SocketIo io;
    io.socket = std::move(sockets[i]);
    io.sendFrame = i;
    io.recvFrame = i;
    sockets_.push_back(std::move(io));
  }
  if (express.valid()) express_ = std::make_unique<ExpressPath>(peer, std::move(express));
}

TcpChannel::~TcpChannel() = default;

void TcpChannel::close() noexcept {
  if (closed_.exchange(true)) return;
  shutdownSockets();
  // The express path is the caller's: it ends only when this side closes
  // (the proxy retiring a channel whose FIFO sockets saw EOF leaves it be,
  // so a message the peer sent before it left is still read).
  if (express_) express_->shutdown();
  // The ends the proxy serves: local peek()/acquire() calls end now.
  recvFifo_.closeProducer();
  sendFifo_.closeConsumer();
  waker_->wake();  // the proxy drops the channel
}

void TcpChannel::shutdownSockets() noexcept {
  if (socketsShut_.exchange(true)) return;
  for (auto& s : sockets_) s.socket.shutdownBoth();
}

bool TcpChannel::finished() const noexcept {
  return closed_.load(std::memory_order_acquire) || (sendEnded_ && recvEnded_);
}

void TcpChannel::refreshCounters() noexcept {
  // The FIFO counters are the low 32 bits of ours; add the wrapped difference.
  uint32_t tail = sendFifo_.control()->tail.load(std::memory_order_acquire);
  sendPublished_ += static_cast<uint32_t>(tail - static_cast<uint32_t>(sendPublished_));
  uint32_t head = recvFifo_.control()->head.load(std::memory_order_acquire);
  recvReleased_ += static_cast<uint32_t>(head - static_cast<uint32_t>(recvReleased_));
}

bool TcpChannel::sendInterest(const SocketIo& s) const noexcept {
  return !sendEnded_ && s.sendFrame < sendPublished_;
}

bool TcpChannel::recvInterest(const SocketIo& s) const noexcept {
  return !recvEnded_ && !s.eof && s.recvFrame - recvReleased_ < slotCount_;
}

bool TcpChannel::progress() noexcept {
  if (finished()) return false;
  refreshCounters();
  bool moved = false;
  for (auto& s : sockets_) {
    if (sendInterest(s) && !s.sendBlocked) moved |= progressSend(s);
    if (failed_) break;
    if (recvInterest(s) && !s.recvBlocked) moved |= progressRecv(s);
    if (failed_) break;
  }
  return moved;
}

bool TcpChannel::wantsAttempt() noexcept {
  if (finished()) return true;  // the proxy retires it on its next pass
  refreshCounters();
  for (const auto& s : sockets_)
    if ((sendInterest(s) && !s.sendBlocked) || (recvInterest(s) && !s.recvBlocked)) return true;
  return false;
}

bool TcpChannel::progressSend(SocketIo& s) noexcept {
  const size_t index = static_cast<size_t>(&s - sockets_.data());
  bool moved = false;
  while (sendInterest(s) && !s.sendBlocked) {
    const uint32_t slot = slotIndex(s.sendFrame);
    if (s.sendDone == 0) {
      const SlotHeader& published = sendFifo_.control()->headers[slot];
      if (published.bytes > slotBytes_) {
        failConnection("this rank published a slot of " + std::to_string(published.bytes) +
             " bytes into a FIFO of " + std::to_string(slotBytes_) + "-byte slots");
        return true;
      }
      s.sendHeader = FrameHeader{published.bytes, kFrameMarker, published.tag};
    }
    const size_t total = kHeaderBytes + s.sendHeader.bytes;
    iovec iov[2];
    int count = 0;
    if (s.sendDone < kHeaderBytes)
      iov[count++] = {reinterpret_cast<uint8_t*>(&s.sendHeader) + s.sendDone,
                      kHeaderBytes - s.sendDone};
    const size_t payloadDone = s.sendDone > kHeaderBytes ? s.sendDone - kHeaderBytes : 0;
    if (s.sendHeader.bytes > payloadDone)
      iov[count++] = {sendMem_.slot(slot) + payloadDone, s.sendHeader.bytes - payloadDone};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t written = ::sendmsg(s.socket.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        s.sendBlocked = true;
        break;
      }
      failConnection("send on socket " + std::to_string(index) + ": " + errnoText(errno));
      return true;
    }
    moved = true;
    const size_t wanted = total - s.sendDone;
    s.sendDone += static_cast<size_t>(written);
    if (s.sendDone == total) {
      s.sendDone = 0;
      s.sendFrame += sockets_.size();
      releaseSentSlots();
    }
    // A short write means the socket buffer is full: wait for POLLOUT rather
    // than spend a syscall learning EAGAIN.
    if (static_cast<size_t>(written) < wanted) s.sendBlocked = true;
  }
  return moved;
}

void TcpChannel::releaseSentSlots() noexcept {
  // Slots are freed in order; frame k is done once its socket moved past it.
  while (sendReleased_ < sendPublished_ && socketOf(sendReleased_).sendFrame > sendReleased_) {
    sendFifo_.release();
    ++sendReleased_;
  }
}

bool validateFrameHeader(const FrameHeader& h, uint32_t slotBytes, std::string* why) {
  if (h.marker != kFrameMarker) {
    *why = "protocol error: bad frame marker 0x" + [&] {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%08x", h.marker);
      return std::string(buf);
    }();
    return false;
  }
  if (h.bytes > slotBytes) {
    *why = "protocol error: frame of " + std::to_string(h.bytes) + " bytes exceeds the " +
           std::to_string(slotBytes) + "-byte slot size";
    return false;
  }
  return true;
}

bool TcpChannel::progressRecv(SocketIo& s) noexcept {
  const size_t index = static_cast<size_t>(&s - sockets_.data());
  bool moved = false;
  while (recvInterest(s) && !s.recvBlocked) {
    uint8_t* dst;
    size_t want;
    if (s.recvDone < kHeaderBytes) {
      dst = reinterpret_cast<uint8_t*>(&s.recvHeader) + s.recvDone;
      want = kHeaderBytes - s.recvDone;
    } else {
      const size_t payloadDone = s.recvDone - kHeaderBytes;
      dst = recvMem_.slot(slotIndex(s.recvFrame)) + payloadDone;
      want = s.recvHeader.bytes - payloadDone;
    }
    ssize_t got = ::recv(s.socket.fd(), dst, want, MSG_DONTWAIT);
    if (got == 0) {
      onCleanEof(s);
      return true;
    }
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        s.recvBlocked = true;
        break;
      }
      failConnection("receive on socket " + std::to_string(index) + ": " + errnoText(errno));
      return true;
    }
    moved = true;
    const size_t before = s.recvDone;
    s.recvDone += static_cast<size_t>(got);
    if (static_cast<size_t>(got) < want) s.recvBlocked = true;  // drained for now
    if (before < kHeaderBytes && s.recvDone == kHeaderBytes) {
      std::string why;
      if (!validateFrameHeader(s.recvHeader, slotBytes_, &why)) {
        failConnection(why + " (socket " + std::to_string(index) + ")");
        return true;
      }
    }
    if (s.recvDone >= kHeaderBytes && s.recvDone == kHeaderBytes + s.recvHeader.bytes) {
      const uint32_t slot = slotIndex(s.recvFrame);
      recvBytes_[slot] = s.recvHeader.bytes;
      recvTags_[slot] = s.recvHeader.tag;
      s.recvDone = 0;
      s.recvFrame += sockets_.size();
      publishReceivedSlots();
    }
  }
  return moved;
}

void TcpChannel::publishReceivedSlots() noexcept {
  // Frames complete out of order across sockets; publish the in-order prefix.
  while (socketOf(recvPublished_).recvFrame > recvPublished_) {
    const uint32_t slot = slotIndex(recvPublished_);
    recvFifo_.publish(recvBytes_[slot], recvTags_[slot]);
    ++recvPublished_;
  }
  // The next frame's socket already ended cleanly, so that frame never
  // comes: the receive side is over. (onCleanEof checks the same when the
  // EOF comes last; tests/fuzz/tcp_frames found the other order, where the
  // executor waited for the frame until its deadline instead of PeerClosed.)
  if (socketOf(recvPublished_).eof) endRecv();
}

void TcpChannel::onCleanEof(SocketIo& s) noexcept {
  const size_t index = static_cast<size_t>(&s - sockets_.data());
  if (s.recvDone != 0) {
    failConnection("peer closed socket " + std::to_string(index) + " in the middle of a frame");
    return;
  }
  s.eof = true;
  s.peerFinished = true;
  endSend("closed the connection");
  // The next frame to publish can never arrive: the receive side is over.
  // Everything published before stays readable.
  if (socketOf(recvPublished_).eof) endRecv();
}

void TcpChannel::endSend(const char* peerAction) noexcept {
  if (sendEnded_) return;
  sendEnded_ = true;
  if (peerAction != nullptr && !closed_.load()) {
    // A peer that tears down its communicator first closes cleanly; that is
    // only worth a warning if we still had data for it.
    if (sendPublished_ > sendReleased_)
      COIL_WARN(kNet, "connection to rank ", peer_, " failed: peer ", peerAction, " with ",
                sendPublished_ - sendReleased_, " of our slot(s) still unsent");
    else
      COIL_INFO(kNet, "rank ", peer_, " ", peerAction);
  }
  sendFifo_.closeConsumer();
}

void TcpChannel::endRecv() noexcept {
  if (recvEnded_) return;
  recvEnded_ = true;
  recvFifo_.closeProducer();
}

void TcpChannel::failConnection(const std::string& why) noexcept {
  if (failed_) return;
  failed_ = true;
  if (!closed_.load()) COIL_WARN(kNet, "connection to rank ", peer_, " failed: ", why);
  endSend(nullptr);
  endRecv();
  shutdownSockets();  // the peer notices at once instead of at its deadline
}

void TcpChannel::addPollFds(std::vector<pollfd>& fds, std::vector<PollOwner>& owners) {
  if (finished()) return;
  for (uint32_t i = 0; i < sockets_.size(); ++i) {
    const SocketIo& s = sockets_[i];
    short events = 0;
    if (!s.peerFinished) events |= POLLRDHUP;  // notice a peer's close even when idle
    if (sendInterest(s) && s.sendBlocked) events |= POLLOUT;
    if (recvInterest(s) && s.recvBlocked) events |= POLLIN;
    if (events == 0) continue;
    fds.push_back(pollfd{s.socket.fd(), events, 0});
    owners.push_back(PollOwner{this, i});
  }
}

void TcpChannel::onPollEvents(uint32_t index, short revents) noexcept {
  SocketIo& s = sockets_[index];
  if (revents & (POLLERR | POLLNVAL)) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(s.socket.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    failConnection("socket " + std::to_string(index) + ": " +
         (err != 0 ? errnoText(err) : std::string("poll reported an error")));
    return;
  }
  if (revents & POLLOUT) s.sendBlocked = false;
  if (revents & POLLIN) s.recvBlocked = false;
  if (revents & (POLLRDHUP | POLLHUP)) {
    // The peer sent FIN: nothing we send will be read. Frames it sent before
    // are still in the socket buffer; reading on delivers them, then EOF.
    s.peerFinished = true;
    s.recvBlocked = false;
    endSend("closed the connection");
  }
}

}  // namespace coil::transport::tcp
