#include "transports/ib/ib_transport.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <type_traits>

#include "core/error.h"
#include "core/log.h"
#include "net/acceptor.h"
#include "net/auth.h"
#include "transports/direct_io.h"

namespace coil::transport::ib {

namespace {

constexpr const char* kAuthPurpose = "ib-setup";
constexpr uint32_t kRecordMagic = 0x4c42494c;  // a listener record
constexpr int kHandshakeMs = 5000;
constexpr char kReady = 'R';

struct ListenerRecord {
  uint32_t magic;
  uint32_t hasListener;
  uint32_t addressLength;
  uint32_t reserved;
  sockaddr_storage address;
};
static_assert(std::is_trivially_copyable_v<ListenerRecord>);
static_assert(sizeof(PortAddress) <= kAddressBytes);

// Not measured on InfiniBand hardware yet (no machine here has any): a
// 100 Gb/s link moves ~11 GB/s, and a slot hand-off costs two proxy
// wake-ups plus a round trip, ~10 µs. COIL_TUNE / COIL_TUNE_FILE override.
const Traits& ibTraits() {
  static const Traits traits{"ib", /*peerMemoryMapped=*/false,
                             LinkCost{10.0, 1.0 / 11000.0, 1.0 / 8000.0, 1.0},
                             LinkCost{10.0, 1.0 / 11000.0, 1.0 / 8000.0, 1.0}};
  return traits;
}

class IbConnection final : public Connection, public DirectIo {
 public:
  explicit IbConnection(std::shared_ptr<IbChannel> channel) : channel_(std::move(channel)) {}
  ~IbConnection() override { channel_->close(); }
  SlotFifo& sendFifo() override { return channel_->sendFifo(); }
  SlotFifo& recvFifo() override { return channel_->recvFifo(); }
  void kick() noexcept override { channel_->kick(); }
  bool sent() const override { return channel_->sendFifo().pending() == 0; }
  void close() noexcept override { channel_->close(); }
  const Traits& traits() const override { return ibTraits(); }
  int peer() const override { return channel_->peer(); }
  DirectIo* directIo() override { return this; }

  // DirectIo: the channel's rendezvous path (ib_channel.h).
  size_t directFromBytes() const override { return channel_->directFromBytes(); }
  uint64_t postRecv(void* buffer, size_t bytes, uint64_t tag) override {
    return channel_->postDirectRecv(buffer, bytes, tag);
  }
  uint64_t postSend(const void* data, size_t bytes, uint64_t tag) override {
    return channel_->postDirectSend(data, bytes, tag);
  }
  bool done(uint64_t ticket) override { return channel_->directDone(ticket); }
  uint64_t registerBuffer(void* buffer, size_t bytes) override {
    channel_->registrations().add(buffer, bytes);
    registered_.push_back({buffer, bytes});
    return registered_.size();  // 1-based index
  }
  void deregisterBuffer(uint64_t token) override {
    if (token == 0 || token > registered_.size() || registered_[token - 1].first == nullptr) return;
    channel_->registrations().remove(registered_[token - 1].first, registered_[token - 1].second);
    registered_[token - 1].first = nullptr;
  }
  bool registered(const void* buffer, size_t bytes) const override {
    return channel_->registrations().find(buffer, bytes) != nullptr;
  }
  std::string failure() const override { return channel_->failure(); }

 private:
  std::shared_ptr<IbChannel> channel_;
  std::vector<std::pair<void*, size_t>> registered_;  // by token - 1
};

SocketAddress addressOf(const ListenerRecord& r) {
  SocketAddress a;
  a.storage = r.address;
  a.length = r.addressLength;
  return a;
}

void checkInfo(const QueuePairInfo& q, int from, int to) {
  if (q.magic != kQueuePairMagic || q.fromRank != from || q.toRank != to)
    fail(coilRemoteError, "ib: rank ", from, " sent a malformed queue pair record");
}

}  // namespace

IbTransport::IbTransport() : options_(ChannelOptions::fromEnv()) {}

IbTransport::~IbTransport() { shutdown(); }

const Traits& IbTransport::traits() const { return ibTraits(); }

Address IbTransport::localAddress() {
  if (!device_ && why_.empty()) device_ = IbDevice::open(&why_);
  Address a;
  if (!device_) {
    COIL_INFO(kNet, "ib: not usable on this rank: ", why_);
    return a;
  }
  a.length = sizeof(PortAddress);
  std::memcpy(a.bytes, &device_->address(), sizeof(PortAddress));
  return a;
}

bool IbTransport::canReach(const Endpoint& self, const Endpoint& peer) const {
  if (self.address.length != sizeof(PortAddress) || peer.address.length != sizeof(PortAddress))
    return false;
  PortAddress a, b;
  std::memcpy(&a, self.address.bytes, sizeof a);
  std::memcpy(&b, peer.address.bytes, sizeof b);
  return a.magic == kPortAddressMagic && b.magic == kPortAddressMagic &&
         a.linkLayer == b.linkLayer;
}

std::vector<std::unique_ptr<Connection>> IbTransport::connect(SetupContext& ctx,
                                                              const std::vector<int>& peerRanks) {
  if (shutDown_) fail(coilInvalidUsage, "ib: connect() after shutdown()");
  std::set<int> seen;
  std::vector<int> lower, higher;
  for (int peer : peerRanks) {
    if (peer < 0 || peer >= ctx.nranks || peer == ctx.rank || !seen.insert(peer).second)
      fail(coilInvalidArgument, "ib: peer rank ", peer, " is invalid or listed twice for rank ",
           ctx.rank, " of ", ctx.nranks);
    (peer < ctx.rank ? lower : higher).push_back(peer);
  }
  std::sort(lower.begin(), lower.end());
  std::sort(higher.begin(), higher.end());
  if (!peerRanks.empty() && !device_) {
    if (why_.empty()) device_ = IbDevice::open(&why_);
    if (!device_) fail(coilInvalidUsage, "ib: rank ", ctx.rank, " has no usable device: ", why_);
  }

  // Listener records: every rank takes part so the exchange lines up.
  Socket listener;
  ListenerRecord mine{};
  mine.magic = kRecordMagic;
  if (!lower.empty()) {
    SocketAddress bind = ctx.oob.localAddress();
    bind.setPort(0);
    listener = Socket::listen(bind);
    const SocketAddress bound = listener.localAddress();
    mine.hasListener = 1;
    mine.address = bound.storage;
    mine.addressLength = bound.length;
  }
  std::vector<ListenerRecord> records(static_cast<size_t>(ctx.nranks));
  records[static_cast<size_t>(ctx.rank)] = mine;
  ctx.oob.allGather(records.data(), sizeof(ListenerRecord));
  if (peerRanks.empty()) return {};

  waker_ = std::make_shared<ProxyWaker>();
  ibv_cq* cq = device_->completionQueue(
      static_cast<int>(peerRanks.size() * (5 * options_.slotCount + 8)));
  std::map<int, std::shared_ptr<IbChannel>> byPeer;
  std::vector<std::shared_ptr<IbChannel>> channels;
  for (int peer : peerRanks) {
    auto ch = std::make_shared<IbChannel>(device_, cq, ctx.rank, peer,
                                          static_cast<uint32_t>(channels.size()), options_, waker_);
    byPeer[peer] = ch;
    channels.push_back(ch);
  }

  // Lower ranks connect; as in tcp, connecting to every higher rank before
  // accepting cannot deadlock (the highest rank only accepts).
  std::map<int, Socket> sockets;
  for (int peer : higher) {
    const ListenerRecord& rec = records[static_cast<size_t>(peer)];
    if (rec.magic != kRecordMagic || !rec.hasListener || rec.addressLength == 0 ||
        rec.addressLength > sizeof rec.address)
      fail(coilRemoteError, "ib: rank ", peer, " published no usable setup listener");
    const SocketAddress addr = addressOf(rec);
    try {
      Socket s = Socket::connect(addr, ctx.deadline, ctx.abortFlag, Socket::Refused::kFinal);
      auth::proveAsClient(s, ctx.oob.secret(), kAuthPurpose, ctx.deadline);
      const QueuePairInfo info = byPeer[peer]->localInfo();
      s.sendAll(&info, sizeof info, ctx.deadline, ctx.abortFlag, "ib setup peer");
      QueuePairInfo theirs{};
      s.recvAll(&theirs, sizeof theirs, ctx.deadline, ctx.abortFlag, "ib setup peer");
      checkInfo(theirs, peer, ctx.rank);
      byPeer[peer]->connectTo(theirs);
      sockets[peer] = std::move(s);
    } catch (const Error& e) {
      fail(e.code(), "ib: rank ", ctx.rank, " setting up its queue pair with rank ", peer, " at ",
           addr.toString(), ": ", e.what());
    }
  }
  if (!lower.empty()) {
    AuthenticatedAcceptor acceptor(listener, ctx.oob.secret(), kAuthPurpose,
                                   sizeof(QueuePairInfo),
                                   "ib setup listener of rank " + std::to_string(ctx.rank),
                                   kHandshakeMs);
    auto stop = [&] {
      ctx.oob.checkRing();
      return ctx.abortFlag != nullptr && ctx.abortFlag->load();
    };
    size_t missing = lower.size();
    while (missing > 0) {
      std::optional<AuthenticatedAcceptor::Accepted> a = acceptor.next(ctx.deadline, stop);
      if (!a)
        fail(ctx.deadline.expired() ? coilTimeout : coilRemoteError, "ib: rank ", ctx.rank,
             " waiting for queue pairs from ", missing, " lower rank(s): ",
             ctx.deadline.expired() ? "timed out" : "aborted");
      QueuePairInfo theirs;
      std::memcpy(&theirs, a->hello.data(), sizeof theirs);
      const bool expected = theirs.magic == kQueuePairMagic && theirs.toRank == ctx.rank &&
                            std::find(lower.begin(), lower.end(), theirs.fromRank) != lower.end() &&
                            sockets.count(theirs.fromRank) == 0;
      if (!expected) {
        logRefusedConnection(a->peer, "not a queue pair record for this rank",
                             "ib setup listener of rank " + std::to_string(ctx.rank));
        continue;
      }
      const int peer = theirs.fromRank;
      const QueuePairInfo info = byPeer[peer]->localInfo();
      a->socket.sendAll(&info, sizeof info, ctx.deadline, ctx.abortFlag, "ib setup peer");
      byPeer[peer]->connectTo(theirs);
      sockets[peer] = std::move(a->socket);
      --missing;
    }
  }
  listener.reset();

  // Both ends at RTS before either writes: each says so, then waits to hear it.
  for (auto& [peer, s] : sockets) s.sendAll(&kReady, 1, ctx.deadline, ctx.abortFlag, "ib peer");
  for (auto& [peer, s] : sockets) {
    char r = 0;
    s.recvAll(&r, 1, ctx.deadline, ctx.abortFlag, "ib peer");
    if (r != kReady) fail(coilRemoteError, "ib: rank ", peer, " sent a bad ready byte");
    COIL_INFO(kNet, "ib: rank ", ctx.rank, " -> rank ", peer, " over ", device_->description(),
              ", QP ", byPeer[peer]->qpn(), ", ", options_.slotCount, "x", options_.slotBytes,
              "B slots");
    byPeer[peer]->adoptSocket(std::move(s));
  }

  proxy_ = std::make_unique<IbProxy>(ctx.rank, device_, cq, waker_);
  proxy_->start(channels);
  std::vector<std::unique_ptr<Connection>> connections;
  for (int peer : peerRanks) connections.push_back(std::make_unique<IbConnection>(byPeer[peer]));
  channels_ = channels;
  return connections;
}

void IbTransport::shutdown() noexcept {
  // A collective returns once its last slot is published, not yet written:
  // give the proxy a bounded moment to deliver what is queued.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const auto& ch : channels_)
    while (ch->sendFifo().pending() != 0 && !ch->failed() &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (proxy_) proxy_->stop();
  for (const auto& ch : channels_) ch->close();
  channels_.clear();
  shutDown_ = true;
}

// Preference 50: shm (0) first on one host, ib before tcp (100).
namespace {
[[maybe_unused]] const bool registered = [] {
  registerTransport("ib", 50, [] { return std::make_unique<IbTransport>(); });
  return true;
}();
}  // namespace

}  // namespace coil::transport::ib
