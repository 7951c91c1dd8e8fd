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
constexpr int kHandshakeMs = 5000;
constexpr char kReady = 'R';

/// What a rank publishes (transport::Address): its port, and the listener
/// its lower peers set up their queue pairs through. Exchanged with every
/// transport's address, so connect() needs no exchange of its own.
struct IbAddress {
  PortAddress port;
  uint32_t listenerLength;
  uint8_t listener[sizeof(sockaddr_in6)];  // an IPv4 or IPv6 socket address
};
static_assert(std::is_trivially_copyable_v<IbAddress>);
static_assert(sizeof(IbAddress) <= kAddressBytes);

/// A peer's address, or nullopt when it has none (ib unusable there).
std::optional<IbAddress> ibAddressOf(const Address& a) {
  if (a.length != sizeof(IbAddress)) return std::nullopt;
  IbAddress ib;
  std::memcpy(&ib, a.bytes, sizeof ib);
  if (ib.port.magic != kPortAddressMagic || ib.listenerLength == 0 ||
      ib.listenerLength > sizeof ib.listener)
    return std::nullopt;
  return ib;
}

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
  // A send slot is released when its WRITE_WITH_IMM completes, once the
  // peer's NIC acknowledged both writes: nothing is left on the wire.
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
  void registerBuffer(void* buffer, size_t bytes) override {
    channel_->registrations().add(buffer, bytes);
  }
  void deregisterBuffer(void* buffer, size_t bytes) override {
    channel_->registrations().remove(buffer, bytes);
  }
  bool registered(const void* buffer, size_t bytes) const override {
    return channel_->registrations().find(buffer, bytes) != nullptr;
  }
  std::string failure() const override { return channel_->failure(); }

 private:
  std::shared_ptr<IbChannel> channel_;
};

SocketAddress listenerOf(const IbAddress& ib) {
  SocketAddress a;
  std::memcpy(&a.storage, ib.listener, ib.listenerLength);
  a.length = ib.listenerLength;
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

std::string IbTransport::unusable() {
  if (!device_ && why_.empty()) device_ = IbDevice::open(&why_);
  return why_;
}

Address IbTransport::localAddress(const OutOfBand& oob) {
  Address a;
  if (!unusable().empty()) {
    COIL_INFO(kNet, "ib: not usable on this rank: ", why_);
    return a;
  }
  // Lower peers set up their queue pairs through this listener. Opened
  // whether or not one will: a socket is cheap, an exchange per init is not.
  SocketAddress bind = oob.localAddress();
  bind.setPort(0);
  listener_ = Socket::listen(bind);
  const SocketAddress bound = listener_.localAddress();
  IbAddress ib{};
  ib.port = device_->address();
  if (bound.length > sizeof ib.listener)
    fail(coilInternalError, "ib: a listener address of ", bound.length, " bytes");
  ib.listenerLength = bound.length;
  std::memcpy(ib.listener, &bound.storage, bound.length);
  a.length = sizeof ib;
  std::memcpy(a.bytes, &ib, sizeof ib);
  return a;
}

bool IbTransport::canReach(const Endpoint& self, const Endpoint& peer) const {
  const auto a = ibAddressOf(self.address), b = ibAddressOf(peer.address);
  return a && b && a->port.linkLayer == b->port.linkLayer;
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
  // Nothing to exchange here: the addresses came with every transport's.
  if (peerRanks.empty()) {
    listener_.reset();
    return {};
  }
  if (!unusable().empty())
    fail(coilInvalidUsage, "ib: rank ", ctx.rank, " has no usable device: ", why_);
  if (ctx.addresses == nullptr || ctx.addresses->size() != static_cast<size_t>(ctx.nranks) ||
      !listener_.valid())
    fail(coilInternalError, "ib: connect() without the ranks' addresses (localAddress first)");

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
    const auto theirAddress = ibAddressOf((*ctx.addresses)[static_cast<size_t>(peer)]);
    if (!theirAddress)
      fail(coilRemoteError, "ib: rank ", peer, " published no usable ib address");
    const SocketAddress addr = listenerOf(*theirAddress);
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
    AuthenticatedAcceptor acceptor(listener_, ctx.oob.secret(), kAuthPurpose,
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
  listener_.reset();

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
