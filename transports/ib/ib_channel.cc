#include "transports/ib/ib_channel.h"

#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace coil::transport::ib {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kWireHeaderStride = 64;  // one cache line per header
constexpr uint32_t kMaxSlotBytes = 64u << 20;

size_t pageRound(size_t n) { return (n + kPage - 1) / kPage * kPage; }
// The largest single RDMA WRITE of a direct message (rxe takes 2^31 bytes).
constexpr uint64_t kMaxWriteBytes = uint64_t{1} << 30;
constexpr uint32_t kMaxDirectWrites = 16;  // direct messages up to 16 GiB
uint32_t sendQueueDepth(uint32_t slots) { return 3 * slots + 4 + kDirectSlots * 2 + kMaxDirectWrites; }
uint32_t recvQueueDepth(uint32_t slots) { return 2 * slots + 4 + 2 * kDirectSlots; }

}  // namespace

ChannelOptions ChannelOptions::fromEnv() {
  ChannelOptions o;
  if (auto v = env::getInt("COIL_IB_SLOTS", 1, kMaxSlots)) {
    o.slotCount = static_cast<uint32_t>(*v);
    if ((o.slotCount & (o.slotCount - 1)) != 0)
      fail(coilInvalidUsage, "COIL_IB_SLOTS=", o.slotCount, ": must be a power of two <= ",
           kMaxSlots);
  }
  if (auto v = env::getInt("COIL_IB_SLOT_BYTES", 4096, kMaxSlotBytes))
    o.slotBytes = static_cast<uint32_t>(*v) / 64 * 64;
  if (auto v = env::getInt("COIL_IB_TIMEOUT", 1, 31)) o.timeout = static_cast<int>(*v);
  if (auto v = env::getInt("COIL_IB_RETRY_CNT", 0, 7)) o.retryCount = static_cast<int>(*v);
  if (auto v = env::getInt("COIL_IB_DIRECT_BYTES", 0, INT64_MAX))
    o.directFrom = *v == 0 ? UINT64_MAX : static_cast<uint64_t>(*v);
  return o;
}

IbChannel::IbChannel(std::shared_ptr<IbDevice> device, ibv_cq* cq, int rank, int peer,
                     uint32_t index, const ChannelOptions& options,
                     std::shared_ptr<ProxyWaker> waker)
    : device_(std::move(device)),
      waker_(std::move(waker)),
      rank_(rank),
      peer_(peer),
      index_(index),
      options_(options) {
  const size_t ctlBytes = pageRound(sizeof(FifoControl));
  const size_t dataBytes = pageRound(fifoDataBytes(options.slotCount, options.slotBytes));
  const size_t headerBytes = pageRound((options.slotCount + kDirectSlots) * kWireHeaderStride);
  memoryBytes_ = 2 * (ctlBytes + dataBytes) + headerBytes;
  void* mem = mmap(nullptr, memoryBytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) failErrno("ib: allocating FIFO memory for rank " + std::to_string(peer), errno);
  memory_ = static_cast<uint8_t*>(mem);
  auto* sendCtl = reinterpret_cast<FifoControl*>(memory_);
  uint8_t* sendData = memory_ + ctlBytes;
  auto* recvCtl = reinterpret_cast<FifoControl*>(sendData + dataBytes);
  uint8_t* recvData = reinterpret_cast<uint8_t*>(recvCtl) + ctlBytes;
  recvData_ = recvData;
  wireHeaders_ = reinterpret_cast<WireHeader*>(recvData + dataBytes);
  ctsRing_ = recvData + dataBytes + options.slotCount * kWireHeaderStride;
  new (sendCtl) FifoControl();
  new (recvCtl) FifoControl();
  sendCtl->init(options.slotCount, options.slotBytes);
  recvCtl->init(options.slotCount, options.slotBytes);
  // Both ends of each FIFO are in this process: the executor and the proxy.
  sendCtl->producerPid = sendCtl->consumerPid = recvCtl->producerPid = recvCtl->consumerPid =
      static_cast<int32_t>(getpid());
  send_ = SlotFifo(sendCtl, sendData);
  recv_ = SlotFifo(recvCtl, recvData);

  // Registered once, kept for the channel's life: no registration on the
  // data path.
  mr_ = api().regMr(device_->pd(), memory_, memoryBytes_,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr_ == nullptr) {
    const int err = errno;
    munmap(memory_, memoryBytes_);
    memory_ = nullptr;
    failErrno("ib: ibv_reg_mr of " + std::to_string(memoryBytes_) + " bytes for rank " +
                  std::to_string(peer) + " (is the locked-memory limit, ulimit -l, too low?)",
              err);
  }

  ibv_qp_init_attr attr{};
  attr.send_cq = cq;
  attr.recv_cq = cq;
  attr.qp_type = IBV_QPT_RC;
  // Data: two requests per slot in flight; credits: one per slot at most;
  // direct: a CTS per announced receive, a write and its "done" per send.
  attr.cap.max_send_wr = sendQueueDepth(options.slotCount);
  attr.cap.max_recv_wr = recvQueueDepth(options.slotCount);
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = sizeof(ClearToSend);
  qp_ = api().createQp(device_->pd(), &attr);
  if (qp_ == nullptr) failErrno("ib: ibv_create_qp for rank " + std::to_string(peer), errno);
  sendQueueFree_ = sendQueueDepth(options.slotCount);
  credits_ = options.slotCount;

  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.pkey_index = 0;
  init.port_num = device_->address().port;
  init.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (int rc = api().modifyQp(qp_, &init,
                              IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    failErrno("ib: moving the QP for rank " + std::to_string(peer) + " to INIT", rc);
  for (uint32_t i = 0; i < recvQueueDepth(options.slotCount); ++i) postReceive();
  psn_ = std::random_device{}() & 0xffffff;
}

IbChannel::~IbChannel() {
  if (qp_) api().destroyQp(qp_);
  if (mr_) api().deregMr(mr_);
  if (memory_) munmap(memory_, memoryBytes_);
}

QueuePairInfo IbChannel::localInfo() const {
  QueuePairInfo q{};
  q.magic = kQueuePairMagic;
  q.fromRank = rank_;
  q.toRank = peer_;
  q.qpn = qp_->qp_num;
  q.psn = psn_;
  q.slotCount = options_.slotCount;
  q.slotBytes = options_.slotBytes;
  q.rkey = mr_->rkey;
  q.recvSlots = reinterpret_cast<uint64_t>(recvData_);
  q.wireHeaders = reinterpret_cast<uint64_t>(wireHeaders_);
  q.ctsRing = reinterpret_cast<uint64_t>(ctsRing_);
  q.directFrom = options_.directFrom;
  std::memcpy(q.gid, device_->address().gid, sizeof q.gid);
  q.lid = device_->address().lid;
  q.activeMtu = device_->address().activeMtu;
  return q;
}

void IbChannel::connectTo(const QueuePairInfo& remote) {
  if (remote.slotCount != options_.slotCount || remote.slotBytes != options_.slotBytes)
    coil::fail(coilInvalidUsage, "ib: rank ", peer_, " uses ", remote.slotCount, "x", remote.slotBytes,
         "B slots, rank ", rank_, " uses ", options_.slotCount, "x", options_.slotBytes,
         "B; set COIL_IB_SLOTS and COIL_IB_SLOT_BYTES alike on every rank");
  if (remote.directFrom != options_.directFrom)
    coil::fail(coilInvalidUsage, "ib: rank ", peer_, " sends messages of ", remote.directFrom,
               " bytes and more directly, rank ", rank_, " from ", options_.directFrom,
               "; set COIL_IB_DIRECT_BYTES alike on every rank");
  remoteSlots_ = remote.recvSlots;
  remoteCtsRing_ = remote.ctsRing;
  remoteHeaders_ = remote.wireHeaders;
  remoteKey_ = remote.rkey;

  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  // The path MTU is the smaller of the two ports' active MTUs.
  rtr.path_mtu = static_cast<ibv_mtu>(std::min(device_->address().activeMtu, remote.activeMtu));
  rtr.dest_qp_num = remote.qpn;
  rtr.rq_psn = remote.psn;
  rtr.max_dest_rd_atomic = 1;
  rtr.min_rnr_timer = 12;
  rtr.ah_attr.port_num = device_->address().port;
  if (device_->roce()) {
    rtr.ah_attr.is_global = 1;
    std::memcpy(rtr.ah_attr.grh.dgid.raw, remote.gid, sizeof remote.gid);
    rtr.ah_attr.grh.sgid_index = device_->address().gidIndex;
    rtr.ah_attr.grh.hop_limit = 64;
  } else {
    rtr.ah_attr.dlid = remote.lid;
  }
  if (int rc = api().modifyQp(qp_, &rtr,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                  IBV_QP_MIN_RNR_TIMER))
    failErrno("ib: moving the QP for rank " + std::to_string(peer_) + " to RTR (" +
                  device_->description() + ")",
              rc);
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = static_cast<uint8_t>(options_.timeout);
  rts.retry_cnt = static_cast<uint8_t>(options_.retryCount);
  rts.rnr_retry = 7;  // a receiver always reposts: wait for it, never fail
  rts.sq_psn = psn_;
  rts.max_rd_atomic = 1;
  if (int rc = api().modifyQp(qp_, &rts,
                              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    failErrno("ib: moving the QP for rank " + std::to_string(peer_) + " to RTS", rc);
}

void IbChannel::postReceive() {
  ibv_recv_wr wr{};
  wr.wr_id = workId(kRecv, 0);
  wr.sg_list = nullptr;
  wr.num_sge = 0;  // WRITE_WITH_IMM consumes a receive but places no data through it
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad))
    fail("ibv_post_recv failed: " + std::string(std::strerror(rc)));
}

void IbChannel::postData(const RecvSlot& slot) {
  const uint32_t index = sendPosted_ % options_.slotCount;
  ibv_sge data{reinterpret_cast<uint64_t>(slot.data), slot.bytes, mr_->lkey};
  const WireHeader header{slot.bytes, 0, slot.tag};
  ibv_sge head{reinterpret_cast<uint64_t>(&header), sizeof header, 0};  // inline: no key

  ibv_send_wr wrs[2]{};
  ibv_send_wr& write = wrs[0];
  ibv_send_wr& announce = wrs[1];
  write.opcode = IBV_WR_RDMA_WRITE;
  write.sg_list = &data;
  write.num_sge = 1;
  write.wr.rdma.remote_addr = remoteSlots_ + static_cast<uint64_t>(index) * options_.slotBytes;
  write.wr.rdma.rkey = remoteKey_;
  write.next = &announce;
  announce.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  announce.sg_list = &head;
  announce.num_sge = 1;
  announce.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  announce.imm_data = htonl(0);
  announce.wr.rdma.remote_addr = remoteHeaders_ + static_cast<uint64_t>(index) * kWireHeaderStride;
  announce.wr.rdma.rkey = remoteKey_;
  const uint32_t weight = slot.bytes > 0 ? 2 : 1;
  announce.wr_id = workId(kData, weight);
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, slot.bytes > 0 ? &write : &announce, &bad)) {
    fail("ibv_post_send failed: " + std::string(std::strerror(rc)));
    return;
  }
  sendQueueFree_ -= weight;
  --credits_;
  ++sendPosted_;
}

void IbChannel::postCredit(uint32_t slots) {
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.num_sge = 0;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(kImmCredit | slots);
  wr.wr.rdma.remote_addr = remoteHeaders_;
  wr.wr.rdma.rkey = remoteKey_;
  wr.wr_id = workId(kCredit, 1);
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad)) {
    fail("ibv_post_send (credit) failed: " + std::string(std::strerror(rc)));
    return;
  }
  --sendQueueFree_;
}

bool IbChannel::pump() {
  if (failed() || closed_.load(std::memory_order_acquire)) return false;
  bool posted = false;
  RecvSlot slot;
  while (credits_ > 0 && sendQueueFree_ >= 2 && send_.tryPeekAt(sendPosted_ - sendDone_, &slot)) {
    postData(slot);
    posted = true;
  }
  const uint32_t head = recv_.control()->head.load(std::memory_order_acquire);
  if (head != recvCredited_ && sendQueueFree_ >= 1 && !failed()) {
    postCredit(head - recvCredited_);
    recvCredited_ = head;
    posted = true;
  }
  const uint32_t before = sendQueueFree_;
  pumpDirect();
  return posted || sendQueueFree_ != before;
}

// ---- direct path ----------------------------------------------------------------

uint64_t IbChannel::postDirect(bool isSend, void* buffer, size_t bytes, uint64_t tag) {
  // The application's registration (coilCommRegister) when it has one; else
  // one for this message only. Caching those would need to learn when the
  // application frees or remaps the buffer (memory hooks), or a write could
  // land in pages that no longer back it.
  ibv_mr* mr = device_->registrations().find(buffer, bytes);
  const bool ownsMr = mr == nullptr;
  if (ownsMr)
    mr = api().regMr(device_->pd(), buffer, bytes,
                     IBV_ACCESS_LOCAL_WRITE | (isSend ? 0 : IBV_ACCESS_REMOTE_WRITE));
  const int err = errno;
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(directMutex_);
    ticket = nextTicket_++;
    (isSend ? directSends_ : directRecvs_)
        .push_back({ticket, buffer, bytes, tag, mr, ownsMr && mr != nullptr, DirectOp::kQueued});
  }
  // The peer waits for this message: a pair that cannot carry it fails,
  // and the peer learns it from the closed socket.
  if (mr == nullptr)
    fail("cannot register " + std::to_string(bytes) + " bytes of the " +
         (isSend ? "send" : "receive") + " buffer for rank " + std::to_string(peer_) + ": " +
         std::strerror(err) + " (is the locked-memory limit, ulimit -l, too low?)");
  waker_->wake();
  return ticket;
}

uint64_t IbChannel::postDirectRecv(void* buffer, size_t bytes, uint64_t tag) {
  return postDirect(false, buffer, bytes, tag);
}

uint64_t IbChannel::postDirectSend(const void* data, size_t bytes, uint64_t tag) {
  return postDirect(true, const_cast<void*>(data), bytes, tag);
}

bool IbChannel::directDone(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(directMutex_);
  const bool broken = failed();
  for (auto* ops : {&directSends_, &directRecvs_})
    for (auto it = ops->begin(); it != ops->end(); ++it) {
      if (it->ticket != ticket) continue;
      if (it->state != DirectOp::kDone && !broken) return false;
      if (it->ownsMr) api().deregMr(it->mr);
      ops->erase(it);
      return true;
    }
  return true;  // retired already
}

std::string IbChannel::failure() const {
  std::lock_guard<std::mutex> lock(directMutex_);
  return failure_;
}

void IbChannel::pumpDirect() {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(directMutex_);
    why = pumpDirectLocked();
  }
  if (!why.empty()) fail(why);
}

std::string IbChannel::pumpDirectLocked() {
  if (failed()) return {};
  // Receiver: announce queued receives, at most kDirectSlots not yet done.
  for (DirectOp& op : directRecvs_) {
    if (op.state != DirectOp::kQueued) continue;
    if (ctsSent_ - recvsDone_ >= kDirectSlots || sendQueueFree_ < 1) break;
    if (std::string why = postClearToSend(op); !why.empty()) return why;
  }
  // Sender: each clear-to-send goes to the oldest send not yet written.
  for (DirectOp& op : directSends_) {
    if (op.state != DirectOp::kQueued) continue;
    if (arrivedCts_.empty()) break;
    const uint32_t writes = static_cast<uint32_t>((op.bytes + kMaxWriteBytes - 1) / kMaxWriteBytes);
    if (writes > kMaxDirectWrites)
      return "a direct message of " + std::to_string(op.bytes) + " bytes is over the limit of " +
             std::to_string(kMaxDirectWrites * kMaxWriteBytes);
    if (sendQueueFree_ < writes + 1) break;
    const ClearToSend cts = arrivedCts_.front();
    if (cts.tag != op.tag || cts.bytes != op.bytes)
      return "rank " + std::to_string(peer_) + " receives " + std::to_string(cts.bytes) +
             " bytes (tag " + std::to_string(cts.tag) + ") where this rank sends " +
             std::to_string(op.bytes) + " bytes (tag " + std::to_string(op.tag) +
             "): the calls do not match";
    arrivedCts_.pop_front();
    if (std::string why = postDirectWrite(op, cts); !why.empty()) return why;
  }
  return {};
}

std::string IbChannel::postClearToSend(DirectOp& op) {
  const ClearToSend cts{op.tag, reinterpret_cast<uint64_t>(op.buffer), op.bytes, op.mr->rkey, 0};
  ibv_sge sge{reinterpret_cast<uint64_t>(&cts), sizeof cts, 0};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  wr.imm_data = htonl(kImmCts);
  wr.wr.rdma.remote_addr = remoteCtsRing_ + (ctsSent_ % kDirectSlots) * kWireHeaderStride;
  wr.wr.rdma.rkey = remoteKey_;
  wr.wr_id = workId(kCts, 1);
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad))
    return "ibv_post_send (clear-to-send) failed: " + std::string(std::strerror(rc));
  --sendQueueFree_;
  ++ctsSent_;
  op.state = DirectOp::kPosted;
  return {};
}

std::string IbChannel::postDirectWrite(DirectOp& op, const ClearToSend& cts) {
  const uint32_t writes = static_cast<uint32_t>((op.bytes + kMaxWriteBytes - 1) / kMaxWriteBytes);
  std::vector<ibv_sge> sges(writes);
  std::vector<ibv_send_wr> wrs(writes + 1);
  for (uint32_t i = 0; i < writes; ++i) {
    const uint64_t offset = i * kMaxWriteBytes;
    const uint64_t n = std::min<uint64_t>(kMaxWriteBytes, op.bytes - offset);
    sges[i] = {reinterpret_cast<uint64_t>(op.buffer) + offset, static_cast<uint32_t>(n),
               op.mr->lkey};
    wrs[i].opcode = IBV_WR_RDMA_WRITE;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].wr.rdma.remote_addr = cts.address + offset;
    wrs[i].wr.rdma.rkey = cts.rkey;
    wrs[i].next = &wrs[i + 1];
  }
  ibv_send_wr& done = wrs[writes];
  done.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  done.num_sge = 0;
  done.send_flags = IBV_SEND_SIGNALED;
  done.imm_data = htonl(kImmDone);
  done.wr.rdma.remote_addr = cts.address;
  done.wr.rdma.rkey = cts.rkey;
  done.wr_id = workId(kDirect, writes + 1);
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, wrs.data(), &bad))
    return "ibv_post_send (direct write) failed: " + std::string(std::strerror(rc));
  sendQueueFree_ -= writes + 1;
  op.state = DirectOp::kPosted;
  return {};
}

void IbChannel::complete(const ibv_wc& wc) {
  const auto kind = static_cast<Kind>((wc.wr_id >> 16) & 0xff);
  const auto weight = static_cast<uint32_t>(wc.wr_id & 0xffff);
  if (wc.status != IBV_WC_SUCCESS) {
    fail(std::string("a work completion failed: ") + api().wcStatusStr(wc.status) +
         " (vendor error " + std::to_string(wc.vendor_err) + ")");
    return;
  }
  switch (kind) {
    case kData:
      sendQueueFree_ += weight;
      ++sendDone_;
      send_.release();  // the peer's NIC acknowledged both writes
      break;
    case kCredit:
    case kCts:
      sendQueueFree_ += weight;
      break;
    case kDirect: {
      sendQueueFree_ += weight;
      std::lock_guard<std::mutex> lock(directMutex_);
      for (DirectOp& op : directSends_)
        if (op.state == DirectOp::kPosted) {
          op.state = DirectOp::kDone;  // the peer's NIC has the whole message
          break;
        }
      break;
    }
    case kRecv: {
      postReceive();
      const uint32_t imm = ntohl(wc.imm_data);
      const uint32_t count = imm & ~kImmKindMask;
      switch (imm & kImmKindMask) {
        case kImmCredit:
          credits_ += count;
          if (credits_ > options_.slotCount)
            fail("rank " + std::to_string(peer_) + " returned more credits than slots");
          return;
        case kImmCts: {
          ClearToSend cts;
          std::memcpy(&cts, ctsRing_ + (ctsArrived_ % kDirectSlots) * kWireHeaderStride, sizeof cts);
          ++ctsArrived_;
          std::lock_guard<std::mutex> lock(directMutex_);
          arrivedCts_.push_back(cts);
          return;
        }
        case kImmDone: {
          std::lock_guard<std::mutex> lock(directMutex_);
          for (DirectOp& op : directRecvs_)
            if (op.state == DirectOp::kPosted) {
              op.state = DirectOp::kDone;  // the whole message has landed
              break;
            }
          ++recvsDone_;
          return;
        }
        default:
          break;  // data: below
      }
      const WireHeader& h =
          *reinterpret_cast<const WireHeader*>(reinterpret_cast<const uint8_t*>(wireHeaders_) +
                                               (recvArrived_ % options_.slotCount) *
                                                   kWireHeaderStride);
      if (recv_.tryAcquire() == nullptr || h.bytes > options_.slotBytes) {
        fail("rank " + std::to_string(peer_) + " wrote a slot the FIFO had no room for (protocol error)");
        break;
      }
      recv_.publish(h.bytes, h.tag);
      ++recvArrived_;
      break;
    }
    default:
      fail("a completion of unknown kind");
  }
}

void IbChannel::socketEvent() {
  char byte;
  const ssize_t n = ::recv(socket_.fd(), &byte, 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n == 0) {
    fail("rank " + std::to_string(peer_) + " closed its connection (it exited, aborted or failed)",
         /*expected=*/true);
    return;
  }
  fail(n < 0 ? "the connection to rank " + std::to_string(peer_) + " failed: " + std::strerror(errno)
             : "rank " + std::to_string(peer_) + " sent bytes on its liveness socket (protocol error)");
}

void IbChannel::fail(const std::string& why, bool expected) noexcept {
  if (failed_.exchange(true, std::memory_order_acq_rel)) return;
  if (expected || closed_.load(std::memory_order_acquire))
    COIL_INFO(kNet, "ib: rank ", rank_, " -> rank ", peer_, ": ", why);
  else
    COIL_WARN(kNet, "ib: rank ", rank_, " -> rank ", peer_, ": ", why);
  {
    std::lock_guard<std::mutex> lock(directMutex_);
    if (failure_.empty()) failure_ = why;
  }
  send_.closeConsumer();
  recv_.closeProducer();
  stopRemoteAccess();
}

// From here on the peer's writes are refused (the QP is in error, its posted
// requests flush) and the peer learns it from the socket: a buffer that a
// failed direct receive had announced is never written after its call
// returned.
void IbChannel::stopRemoteAccess() noexcept {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (qp_ != nullptr) api().modifyQp(qp_, &attr, IBV_QP_STATE);
  socket_.shutdownBoth();
}

void IbChannel::close() noexcept {
  if (closed_.exchange(true, std::memory_order_acq_rel)) return;
  send_.closeProducer();
  recv_.closeConsumer();
  stopRemoteAccess();  // and the peer's proxy sees EOF
  waker_->wake();
}

}  // namespace coil::transport::ib
