#include "transports/tcp/tcp_transport.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "net/acceptor.h"
#include "net/auth.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "transports/tcp/congestion_control.h"
#include "transports/tcp/tcp_connection.h"
#include "transports/tcp/tcp_express.h"
#include "transports/tcp/tcp_proxy.h"

namespace coil::transport::tcp {

namespace {

constexpr const char* kAuthPurpose = "tcp-data";
constexpr uint32_t kRecordMagic = 0x43544c31;  // "1LTC": a listener record
constexpr uint32_t kHelloMagic = 0x43544831;   // "1HTC": a data socket's hello
constexpr uint32_t kMaxSlotBytes = 64u << 20;
// Large socket buffers keep several slots in flight. A peer's sockets share
// one budget, so more sockets do not multiply kernel memory; the kernel also
// clamps each request to net.core.{w,r}mem_max. (The express socket of a
// connection that stays on this host then sends from a smaller one:
// kLocalExpressSendBufferBytes, tcp_express.h.)
constexpr int kPeerBufferBytes = 8 << 20;
constexpr int kMinSocketBufferBytes = 1 << 20;
// Time from accept() to a complete hello. A stranger that connects and stays
// silent holds one handshake slot this long (never the others: handshakes
// run concurrently); a real peer answers in milliseconds.
constexpr int kHandshakeMs = 5000;

/// What every rank publishes about its data listener (allGathered).
struct ListenerRecord {
  uint32_t magic;
  uint32_t hasListener;
  uint32_t nsocks;
  uint32_t slotCount;
  uint32_t slotBytes;
  uint32_t addressLength;
  sockaddr_storage address;
};
static_assert(std::is_trivially_copyable_v<ListenerRecord>);

/// First message on a data socket after authentication.
struct Hello {
  uint32_t magic;
  int32_t fromRank;
  int32_t toRank;
  uint32_t socketIndex;
  uint32_t nsocks;
  uint32_t slotCount;
  uint32_t slotBytes;
  uint32_t reserved;
};
static_assert(sizeof(Hello) == 32);

bool isPowerOfTwo(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// A data socket's buffers and, when one was chosen, its congestion control.
void configureDataSocket(Socket& s, const TcpOptions& o) {
  int bytes = std::max(kMinSocketBufferBytes, kPeerBufferBytes / o.nsocks);
  // Best effort: a smaller buffer is slower, not wrong.
  if (setsockopt(s.fd(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) != 0 ||
      setsockopt(s.fd(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes) != 0)
    COIL_TRACE(kNet, "tcp: cannot set socket buffers to ", bytes, " bytes: ", std::strerror(errno));
  if (!o.congestion.empty()) setCongestionControl(s.fd(), o.congestion);
}

SocketAddress addressOf(const ListenerRecord& r) {
  SocketAddress a;
  a.storage = r.address;
  a.length = r.addressLength;
  return a;
}

std::string describeOptions(uint32_t nsocks, uint32_t slotCount, uint32_t slotBytes) {
  std::ostringstream os;
  os << "nsocks=" << nsocks << " slots=" << slotCount << "x" << slotBytes << "B";
  return os.str();
}

/// Per-connect() state shared by the connecting and accepting halves.
class Setup {
 public:
  Setup(SetupContext& ctx, const TcpOptions& o) : ctx_(ctx), o_(o) {}

  /// Opens `nsocks` authenticated FIFO sockets and the express socket (index
  /// nsocks) to the higher rank `peer`.
  std::vector<Socket> connectTo(int peer, const ListenerRecord& rec) {
    if (!rec.hasListener)
      fail(coilInvalidUsage, "tcp: rank ", ctx_.rank, " lists rank ", peer,
           " as a peer but rank ", peer, " does not list rank ", ctx_.rank,
           " (peer lists passed to connect() must be symmetric)");
    if (rec.addressLength == 0 || rec.addressLength > sizeof rec.address)
      fail(coilRemoteError, "tcp: rank ", peer, " published a listener address of ",
           rec.addressLength, " bytes (at most ", sizeof rec.address, ")");
    const SocketAddress addr = addressOf(rec);
    std::vector<Socket> sockets;
    for (int i = 0; i <= o_.nsocks; ++i) {
      try {
        // The peer listened before the records were exchanged: a refusal
        // means it is gone.
        Socket s = Socket::connect(addr, ctx_.deadline, ctx_.abortFlag, Socket::Refused::kFinal);
        configureDataSocket(s, o_);
        auth::proveAsClient(s, ctx_.oob.secret(), kAuthPurpose, ctx_.deadline);
        Hello hello{kHelloMagic,
                    ctx_.rank,
                    peer,
                    static_cast<uint32_t>(i),
                    static_cast<uint32_t>(o_.nsocks),
                    o_.slotCount,
                    o_.slotBytes,
                    0};
        s.sendAll(&hello, sizeof hello, ctx_.deadline, ctx_.abortFlag, "tcp data peer");
        sockets.push_back(std::move(s));
      } catch (const Error& e) {
        fail(e.code(), "tcp: connecting socket ", i + 1, "/", o_.nsocks + 1, " to rank ", peer, " at ",
             addr.toString(), ": ", e.what());
      }
    }
    return sockets;
  }

  /// Accepts `nsocks` + 1 sockets from every rank in `lower`, dropping
  /// strangers. Handshakes run concurrently (acceptor.h): a stranger that
  /// connects and stays silent costs a slot until its own handshake
  /// deadline, never the real peers' time.
  void acceptFrom(Socket& listener, const std::vector<int>& lower,
                  std::map<int, std::vector<Socket>>& out) {
    for (int peer : lower) out[peer].resize(static_cast<size_t>(o_.nsocks) + 1);
    const std::string context = "tcp data listener of rank " + std::to_string(ctx_.rank);
    AuthenticatedAcceptor acceptor(listener, ctx_.oob.secret(), kAuthPurpose, sizeof(Hello),
                                   context, kHandshakeMs);
    const std::atomic<bool>* abortFlag = ctx_.abortFlag;
    auto aborted = [abortFlag] { return abortFlag != nullptr && abortFlag->load(); };
    // A lower rank that died before it connected never will: its ring
    // neighbours see its bootstrap close, fail, and close theirs in turn.
    auto stop = [&] {
      ctx_.oob.checkRing();
      return aborted();
    };
    size_t missing = lower.size() * (static_cast<size_t>(o_.nsocks) + 1);
    while (missing > 0) {
      std::optional<AuthenticatedAcceptor::Accepted> a;
      try {
        a = acceptor.next(ctx_.deadline, stop);
      } catch (const Error& e) {  // a local failure (poll, accept)
        fail(e.code(), "tcp: rank ", ctx_.rank, " waiting for data connections from ",
             describeMissing(lower, out), ": ", e.what());
      }
      if (!a) {
        if (aborted())
          fail(coilRemoteError, "tcp: rank ", ctx_.rank, " waiting for data connections from ",
               describeMissing(lower, out), ": aborted");
        fail(coilTimeout, "tcp: rank ", ctx_.rank, " waiting for data connections from ",
             describeMissing(lower, out), ": timed out after ", ctx_.deadline.totalMs(), " ms");
      }
      Hello h;
      std::memcpy(&h, a->hello.data(), sizeof h);
      std::string why;
      if (admit(h, a->socket, lower, out, &why))
        --missing;
      else
        logRefusedConnection(a->peer, why, context);
    }
  }

 private:
  /// Checks the hello of an authenticated socket; on success stores the
  /// socket in `out`, else says why not.
  bool admit(const Hello& h, Socket& s, const std::vector<int>& lower,
             std::map<int, std::vector<Socket>>& out, std::string* why) {
    std::ostringstream os;
    if (h.magic != kHelloMagic) {
      os << "bad hello magic";
    } else if (h.toRank != ctx_.rank) {
      os << "hello addressed to rank " << h.toRank << ", this is rank " << ctx_.rank;
    } else if (std::find(lower.begin(), lower.end(), h.fromRank) == lower.end()) {
      os << "hello from rank " << h.fromRank << ", which is not an expected peer";
    } else if (h.nsocks != static_cast<uint32_t>(o_.nsocks) || h.slotCount != o_.slotCount ||
               h.slotBytes != o_.slotBytes) {
      os << "rank " << h.fromRank << " uses " << describeOptions(h.nsocks, h.slotCount, h.slotBytes)
         << ", this rank " << describeOptions(o_.nsocks, o_.slotCount, o_.slotBytes);
    } else if (h.socketIndex > h.nsocks) {  // index nsocks: the express socket
      os << "socket index " << h.socketIndex << " out of range";
    } else if (out[h.fromRank][h.socketIndex].valid()) {
      os << "duplicate socket " << h.socketIndex << " from rank " << h.fromRank;
    } else {
      configureDataSocket(s, o_);
      out[h.fromRank][h.socketIndex] = std::move(s);
      return true;
    }
    *why = os.str();
    return false;
  }

  static std::string describeMissing(const std::vector<int>& lower,
                                     const std::map<int, std::vector<Socket>>& out) {
    std::ostringstream os;
    const char* sep = "rank(s) ";
    for (int peer : lower) {
      const auto& v = out.at(peer);
      size_t have = static_cast<size_t>(std::count_if(v.begin(), v.end(),
                                                      [](const Socket& s) { return s.valid(); }));
      if (have == v.size()) continue;
      os << sep << peer << " (" << have << "/" << v.size() << " sockets)";
      sep = ", ";
    }
    return os.str();
  }

  SetupContext& ctx_;
  const TcpOptions& o_;
};

}  // namespace

// ---- options -------------------------------------------------------------------

TcpOptions TcpOptions::fromEnv() {
  TcpOptions o;
  if (auto v = env::getInt("COIL_NSOCKS", 1, 16)) o.nsocks = static_cast<int>(*v);
  if (auto v = env::getInt("COIL_TCP_SLOTS", 1, kMaxSlots)) {
    o.slotCount = static_cast<uint32_t>(*v);
  } else {
    while (o.slotCount < static_cast<uint32_t>(o.nsocks)) o.slotCount *= 2;
  }
  if (auto v = env::getInt("COIL_TCP_SLOT_BYTES", 1, kMaxSlotBytes))
    o.slotBytes = static_cast<uint32_t>(*v);
  if (auto name = env::get("COIL_TCP_CONGESTION"); name && !name->empty()) {
    checkCongestionControl(*name);
    o.congestion = *name;
  }
  o.validate();
  return o;
}

void TcpOptions::validate() const {
  if (slotCount == 0 || slotCount > kMaxSlots || !isPowerOfTwo(slotCount))
    fail(coilInvalidUsage, "tcp: slot count ", slotCount, " (COIL_TCP_SLOTS) must be a power of two <= ",
         kMaxSlots);
  if (nsocks < 1 || static_cast<uint32_t>(nsocks) > slotCount)
    fail(coilInvalidUsage, "tcp: ", nsocks, " sockets per peer (COIL_NSOCKS) must be in [1, ",
         slotCount, "] (the slot count)");
  if (slotBytes < 1 || slotBytes > kMaxSlotBytes)
    fail(coilInvalidUsage, "tcp: slot size ", slotBytes, " (COIL_TCP_SLOT_BYTES) must be in [1, ",
         kMaxSlotBytes, "]");
}

// ---- transport -----------------------------------------------------------------

// Measured over loopback on the 2-core reference machines
// (docs/performance.md). FIFO (2026-11-21): a slot hand-off through the
// proxy threads costs ~45 µs; one direction of a link carries ~1.5 GB/s
// while the other is busy too (both cost the same CPUs). One-shot over the
// express path: the calling thread drives its own socket, so a message
// costs one loopback hop (3.7-4.3 µs at 8-512 B, 2026-12-07) and no
// hand-off. The FIFO programs on the express path, in 256 KiB pieces
// (2026-12-07): 2 ranks moved 3.8-5.0 GB/s from 128 KiB, their step
// costing about a 12 µs α, so 2 ranks switch from the one-shot to the ring
// between 64 and 128 KiB, where the two were measured to cross.
const Traits& tcpTraits() {
  static const Traits traits{"tcp", /*peerMemoryMapped=*/false,
                             LinkCost{45.0, 1.0 / 1500.0, 1.0 / 8000.0, 1.0},
                             LinkCost{4.0, 1.0 / 3000.0, 1.0 / 8000.0, 1.0},
                             LinkCost{12.0, 1.0 / 6000.0, 1.0 / 8000.0, 1.0}};
  return traits;
}

const Traits& TcpTransport::traits() const { return tcpTraits(); }
const Traits& TcpConnection::traits() const { return tcpTraits(); }

TcpTransport::TcpTransport(TcpOptions options) : options_(options) { options_.validate(); }

TcpTransport::~TcpTransport() { shutdown(); }

void TcpTransport::shutdown() noexcept {
  // A collective returns once its last slot is *published*, not yet written
  // to the socket; give the proxy a bounded moment to write out what is
  // queued so a normal teardown never cuts a peer's last message. A closed
  // channel (abort, peer failure) has nothing worth waiting for.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const auto& ch : channels_) {
    const FifoControl* ctl = ch->sendFifo().control();
    while (ch->sendFifo().pending() != 0 && !ctl->consumerClosed.load() &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (proxy_) proxy_->stop();
  channels_.clear();
  shutDown_ = true;
}

std::vector<std::unique_ptr<Connection>> TcpTransport::connect(SetupContext& ctx,
                                                               const std::vector<int>& peerRanks) {
  if (shutDown_) fail(coilInvalidUsage, "tcp: connect() after shutdown()");
  std::set<int> seen;
  std::vector<int> lower, higher;
  for (int peer : peerRanks) {
    if (peer < 0 || peer >= ctx.nranks || peer == ctx.rank)
      fail(coilInvalidArgument, "tcp: peer rank ", peer, " is invalid for rank ", ctx.rank, " of ",
           ctx.nranks);
    if (!seen.insert(peer).second)
      fail(coilInvalidArgument, "tcp: peer rank ", peer, " listed twice");
    (peer < ctx.rank ? lower : higher).push_back(peer);
  }
  std::sort(lower.begin(), lower.end());
  std::sort(higher.begin(), higher.end());

  // Only ranks that lower ranks connect to listen; every rank takes part in
  // the allGather so the exchange lines up.
  Socket listener;
  ListenerRecord mine{};
  mine.magic = kRecordMagic;
  mine.nsocks = static_cast<uint32_t>(options_.nsocks);
  mine.slotCount = options_.slotCount;
  mine.slotBytes = options_.slotBytes;
  if (!lower.empty()) {
    SocketAddress bindAddress = ctx.oob.localAddress();
    bindAddress.setPort(0);
    listener = Socket::listen(bindAddress);
    configureDataSocket(listener, options_);  // accepted sockets inherit the buffers
    SocketAddress bound = listener.localAddress();
    mine.hasListener = 1;
    mine.address = bound.storage;
    mine.addressLength = bound.length;
    if (listenerObserver_) listenerObserver_(bound);
  }
  std::vector<ListenerRecord> records(static_cast<size_t>(ctx.nranks));
  records[static_cast<size_t>(ctx.rank)] = mine;
  ctx.oob.allGather(records.data(), sizeof(ListenerRecord));
  for (int peer : peerRanks) {
    const ListenerRecord& r = records[static_cast<size_t>(peer)];
    if (r.magic != kRecordMagic)
      fail(coilInternalError, "tcp: rank ", peer, " sent a malformed listener record");
    if (r.nsocks != mine.nsocks || r.slotCount != mine.slotCount || r.slotBytes != mine.slotBytes)
      fail(coilInvalidUsage, "tcp: rank ", peer, " uses ",
           describeOptions(r.nsocks, r.slotCount, r.slotBytes), " but rank ", ctx.rank, " uses ",
           describeOptions(mine.nsocks, mine.slotCount, mine.slotBytes),
           "; set COIL_NSOCKS, COIL_TCP_SLOTS and COIL_TCP_SLOT_BYTES alike on every rank");
  }

  // Lower rank connects. Connecting to all higher ranks before accepting
  // cannot deadlock: the highest rank only accepts, and by induction every
  // rank reaches its accept loop.
  Setup setup(ctx, options_);
  std::map<int, std::vector<Socket>> sockets;
  for (int peer : higher) sockets[peer] = setup.connectTo(peer, records[static_cast<size_t>(peer)]);
  if (!lower.empty()) setup.acceptFrom(listener, lower, sockets);
  listener.reset();

  if (!proxy_) proxy_ = std::make_unique<TcpProxy>(ctx.rank);
  std::vector<std::shared_ptr<TcpChannel>> channels;
  std::vector<std::unique_ptr<Connection>> connections;
  for (int peer : peerRanks) {
    std::vector<Socket>& socks = sockets[peer];
    Socket express = std::move(socks.back());  // socket index nsocks
    const bool local = fitLocalExpressSendBuffer(express);
    COIL_INFO(kNet, "tcp: rank ", ctx.rank, " connected to rank ", peer, " (",
              socks.front().localAddress().toString(), " -> ",
              socks.front().peerAddress().toString(), ", ", options_.nsocks, " socket(s), ",
              options_.slotCount, "x", options_.slotBytes, "B slots, congestion control ",
              congestionControlOf(express.fd()),
              options_.congestion.empty() ? ", the system's" : ", COIL_TCP_CONGESTION",
              ", express send buffer ", sendBufferOf(express), " bytes",
              local ? " (on this host)" : " (across hosts)", ")");
    socks.pop_back();
    auto channel = std::make_shared<TcpChannel>(peer, std::move(socks), options_.slotCount,
                                                options_.slotBytes, proxy_->waker(),
                                                std::move(express));
    channels.push_back(channel);
    connections.push_back(std::make_unique<TcpConnection>(std::move(channel)));
  }
  proxy_->add(channels);
  channels_.insert(channels_.end(), channels.begin(), channels.end());
  return connections;
}

// The transports archive is linked whole, so this registers tcp in every
// program that links coil. Preference 100: after shm (0) and faster fabrics.
namespace {
[[maybe_unused]] const bool registered = [] {
  registerTransport("tcp", 100, [] { return std::make_unique<TcpTransport>(TcpOptions::fromEnv()); });
  return true;
}();
}  // namespace

}  // namespace coil::transport::tcp
