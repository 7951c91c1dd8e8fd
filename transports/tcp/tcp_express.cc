#include "transports/tcp/tcp_express.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace coil::transport::tcp {
namespace {

// The header on the wire is padded from 16 to 64 bytes. Measured
// 2026-12-06 on the 2-vCPU reference VM, 2 ranks over loopback: with
// 16-byte headers a 2 MiB all-reduce on the caller-driven paths took
// 733-820 us, with 64-byte ones 597-658; a stand-alone 2-rank ring showed
// the same (2.7 -> 3.2 GB/s). perf put the difference in the kernel's copy
// out of the socket (_copy_to_iter), which also slowed 3-4x in a plain
// exchange after tiny writes (1-8 bytes) on the same socket; the cause in
// the kernel was not pinned down. An A/B of the two sizes in one commit
// (docs/performance.md 4.3): 16 bytes took 1.4-2.2x as long from 128 KiB
// to 8 MiB, and the same within the noise from 8 B to 32 KiB.
constexpr size_t kHeaderBytes = sizeof(ExpressHeader);
// One recv() brings a small message whole; larger payloads go straight to
// the caller's buffer.
constexpr size_t kStageBytes = 16 * 1024;

}  // namespace

bool fitLocalExpressSendBuffer(const Socket& socket) {
  if (!staysOnThisHost(socket.localAddress(), socket.peerAddress())) return false;
  const int bytes = kLocalExpressSendBufferBytes;
  setsockopt(socket.fd(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  return true;
}

size_t sendBufferOf(const Socket& socket) {
  int bytes = 0;
  socklen_t length = sizeof bytes;
  if (getsockopt(socket.fd(), SOL_SOCKET, SO_SNDBUF, &bytes, &length) != 0) return 0;
  return static_cast<size_t>(bytes);
}

ExpressHeaderVerdict checkExpressHeader(const FrameHeader& h, uint64_t expectedTag,
                                        size_t capacity) {
  if (h.marker != kFrameMarker) return ExpressHeaderVerdict::kBadMarker;
  if (h.tag != expectedTag) return ExpressHeaderVerdict::kOtherTag;
  if (h.bytes > capacity) return ExpressHeaderVerdict::kTooLarge;
  return ExpressHeaderVerdict::kAccept;
}

ExpressPath::ExpressPath(int peer, Socket socket)
    : peer_(peer), socket_(std::move(socket)), stage_(kStageBytes) {}

void ExpressPath::beginSend(const void* data, size_t bytes, uint64_t tag) {
  if (sendData_ != nullptr) fail(coilInternalError, "tcp express: a send is still in flight");
  if (bytes > kExpressMaxBytes)
    fail(coilInternalError, "tcp express: ", bytes, "-byte message exceeds ", kExpressMaxBytes);
  sendHeader_.frame = FrameHeader{static_cast<uint32_t>(bytes), kFrameMarker, tag};
  sendData_ = static_cast<const uint8_t*>(data);
  sendDone_ = 0;
  sendBlocked_ = false;
  // An empty payload still needs a valid pointer to mark "in flight".
  if (sendData_ == nullptr) sendData_ = reinterpret_cast<const uint8_t*>(&sendHeader_);
}

void ExpressPath::beginRecv(void* buffer, size_t capacity, uint64_t expectedTag) {
  if (recvPending_) fail(coilInternalError, "tcp express: a receive is still pending");
  recvBuffer_ = static_cast<uint8_t*>(buffer);
  recvCapacity_ = capacity;
  recvExpectedTag_ = expectedTag;
  recvPending_ = true;
  recvHaveHeader_ = false;
  recvPayloadDone_ = 0;
}

bool ExpressPath::recvComplete(size_t* bytes, uint64_t* tag) const {
  if (recvPending_ || recvBuffer_ == nullptr) return false;
  *bytes = recvHeader_.bytes;
  *tag = recvHeader_.tag;
  return true;
}

void ExpressPath::failWith(const std::string& why) noexcept {
  if (failure_.empty()) failure_ = why;
}

bool ExpressPath::advance() noexcept {
  if (!failure_.empty()) return false;
  if (sendData_ == nullptr && !recvPending_) return false;  // nothing to move
  if (shut_.load(std::memory_order_relaxed)) {
    failWith("the connection to rank " + std::to_string(peer_) + " was closed on this side");
    return false;
  }
  bool moved = advanceSend();
  moved |= advanceRecv();
  return moved;
}

bool ExpressPath::advanceSend() noexcept {
  if (sendData_ == nullptr || !failure_.empty()) return false;
  const size_t total = kHeaderBytes + sendHeader_.frame.bytes;
  bool moved = false;
  while (sendDone_ < total) {
    iovec iov[2];
    int count = 0;
    if (sendDone_ < kHeaderBytes)
      iov[count++] = {reinterpret_cast<uint8_t*>(&sendHeader_) + sendDone_, kHeaderBytes - sendDone_};
    const size_t payloadDone = sendDone_ > kHeaderBytes ? sendDone_ - kHeaderBytes : 0;
    if (sendHeader_.frame.bytes > payloadDone)
      iov[count++] = {const_cast<uint8_t*>(sendData_) + payloadDone,
                      sendHeader_.frame.bytes - payloadDone};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(socket_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        sendBlocked_ = true;
        break;
      }
      failWith("send to rank " + std::to_string(peer_) + " failed: " + std::strerror(errno) +
               " (the peer closed or died)");
      return true;
    }
    moved = true;
    sendDone_ += static_cast<size_t>(n);
  }
  if (sendDone_ == total) sendData_ = nullptr;
  return moved;
}

// Completes the pending message from staged bytes, as far as they go.
// True when the header or any payload byte was taken.
bool ExpressPath::takeFromStage() noexcept {
  size_t used = 0;
  if (!recvHaveHeader_) {
    if (staged_ < kHeaderBytes) return false;
    std::memcpy(&recvHeader_, stage_.data(), sizeof recvHeader_);
    used = kHeaderBytes;
    recvHaveHeader_ = true;
    switch (checkExpressHeader(recvHeader_, recvExpectedTag_, recvCapacity_)) {
      case ExpressHeaderVerdict::kAccept:
        break;
      case ExpressHeaderVerdict::kBadMarker:
        failWith("protocol error from rank " + std::to_string(peer_) +
                 ": bad express frame marker");
        return true;
      case ExpressHeaderVerdict::kOtherTag:
        // Another call's message: report its header, leave its payload.
        recvPending_ = false;
        std::memmove(stage_.data(), stage_.data() + used, staged_ - used);
        staged_ -= used;
        return true;
      case ExpressHeaderVerdict::kTooLarge:
        failWith("rank " + std::to_string(peer_) + " sent a " + std::to_string(recvHeader_.bytes) +
                 "-byte message where at most " + std::to_string(recvCapacity_) +
                 " were expected: the ranks passed different counts");
        return true;
    }
  }
  const size_t take = std::min(staged_ - used, recvHeader_.bytes - recvPayloadDone_);
  std::memcpy(recvBuffer_ + recvPayloadDone_, stage_.data() + used, take);
  recvPayloadDone_ += take;
  used += take;
  std::memmove(stage_.data(), stage_.data() + used, staged_ - used);
  staged_ -= used;
  if (recvPayloadDone_ == recvHeader_.bytes) recvPending_ = false;
  return used > 0;
}

bool ExpressPath::advanceRecv() noexcept {
  if (!recvPending_ || !failure_.empty()) return false;
  bool moved = takeFromStage();
  while (recvPending_ && failure_.empty()) {
    // Until the header is known, read into the stage (a small message comes
    // whole with it); after that, straight into the caller's buffer.
    uint8_t* dst;
    size_t want;
    if (!recvHaveHeader_) {
      dst = stage_.data() + staged_;
      want = stage_.size() - staged_;
    } else {
      dst = recvBuffer_ + recvPayloadDone_;
      want = recvHeader_.bytes - recvPayloadDone_;
    }
    ssize_t n = ::recv(socket_.fd(), dst, want, MSG_DONTWAIT);
    if (n == 0) {
      failWith("rank " + std::to_string(peer_) + " closed its connection (tcp)");
      return true;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      failWith("receive from rank " + std::to_string(peer_) + " failed: " + std::strerror(errno) +
               " (the peer closed or died)");
      return true;
    }
    moved = true;
    if (!recvHaveHeader_) {
      staged_ += static_cast<size_t>(n);
      takeFromStage();
    } else if (recvPending_) {
      recvPayloadDone_ += static_cast<size_t>(n);
      if (recvPayloadDone_ == recvHeader_.bytes) recvPending_ = false;
    }
  }
  return moved;
}

pollfd ExpressPath::pollRequest() const {
  // Only what this rank waits for: a peer that finished and closed must not
  // wake a rank that expects nothing more from it.
  short events = 0;
  if (recvPending_) events |= POLLIN | POLLRDHUP;
  if (sendData_ != nullptr && sendBlocked_) events |= POLLOUT;
  if (!failure_.empty()) events = 0;
  return pollfd{socket_.fd(), events, 0};
}

void ExpressPath::onPollEvents(short revents) noexcept {
  if (revents & POLLOUT) sendBlocked_ = false;
  if (revents & (POLLERR | POLLNVAL)) sendBlocked_ = false;  // the next send reports the error
}

void ExpressPath::shutdown() noexcept {
  if (shut_.exchange(true)) return;
  socket_.shutdownBoth();
}

}  // namespace coil::transport::tcp

// ---- TcpConnection's CallerIo ---------------------------------------------------

namespace coil::transport::tcp {

ExpressPath& TcpConnection::express() const {
  ExpressPath* e = channel_->express();
  if (e == nullptr) fail(coilInternalError, "tcp: connection to rank ", peer(), " has no express path");
  return *e;
}

size_t TcpConnection::expressSendBufferBytes() const { return express().sendBufferBytes(); }

size_t TcpConnection::callerIoMaxBytes() const {
  return channel_->express() != nullptr ? kExpressMaxBytes : 0;
}

void TcpConnection::beginSend(const void* data, size_t bytes, uint64_t tag) {
  express().beginSend(data, bytes, tag);
}

void TcpConnection::beginRecv(void* buffer, size_t capacity, uint64_t expectedTag) {
  express().beginRecv(buffer, capacity, expectedTag);
}

bool TcpConnection::advance() { return express().advance(); }

bool TcpConnection::sendComplete() const { return express().sendComplete(); }

bool TcpConnection::recvComplete(size_t* bytes, uint64_t* tag) const {
  return express().recvComplete(bytes, tag);
}

const std::string& TcpConnection::failure() const { return express().failure(); }

void TcpConnection::awaitAny(const std::vector<CallerIo*>& group, int ms) {
  std::vector<pollfd> fds;
  std::vector<ExpressPath*> owners;
  for (CallerIo* io : group) {
    auto* conn = dynamic_cast<TcpConnection*>(io);
    ExpressPath* e = conn != nullptr ? conn->channel_->express() : nullptr;
    if (e == nullptr) continue;
    pollfd p = e->pollRequest();
    if (p.events == 0) continue;
    fds.push_back(p);
    owners.push_back(e);
  }
  if (fds.empty()) return;
  if (::poll(fds.data(), fds.size(), ms) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents != 0) owners[i]->onPollEvents(fds[i].revents);
}

}  // namespace coil::transport::tcp
