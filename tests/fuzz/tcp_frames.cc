// The tcp transport's frame streams (tcp_connection.h): a TcpChannel over
// 1-4 sockets, each carrying FrameHeader {bytes, marker, tag} + payload,
// frame k on socket k % nsocks, validated (validateFrameHeader) before the
// length is used, reassembled in order into the receive FIFO.
//
// The channel runs on this thread, driven the way TcpProxy::loop drives it
// (progress, then poll with a zero timeout, then onPollEvents), over
// socketpairs whose far ends the target writes. Everything is deterministic.
//
// Input: config byte: nsocks = 1 + bits 0-1; slot count = a power of two
//        (bits 2-4) raised to at least nsocks; bit 5: loopback mode.
//        slot bytes = 1 + next byte. Then operations, one byte each + args.
// Raw mode (the peer is the fuzzer), op & 3:
//   0  write up to 255 raw bytes to socket (op >> 2) % nsocks
//   1  write one frame there: u16 length (up to slotBytes + 1), u8 tag,
//      payload from the input (padded)
//   2  pump the channel, the consumer taking at most (op >> 2) slots
//   3  pump, the consumer taking every slot
//   then the far ends shut down (FIN) and the channel is pumped to the end.
//   Checks: every slot received is, byte for byte, the frame a reference
//   parser finds at that position of the streams written; validateFrameHeader
//   agrees with the reference on every header; when no stream holds a bad
//   header or a cut-off frame, every frame of the in-order prefix arrives;
//   in every case the channel ends (both directions), never hangs.
// Loopback mode (channel A sends to channel B over the socketpairs), op & 3:
//   0  A's executor publishes a slot (u16 length <= slotBytes, u8 tag,
//      payload) if its FIFO has room; 1 pump A; 2 pump B; 3 pump both.
//   Checks: B receives exactly what A published, in order (encode ->
//   decode round trip through the real sender and receiver); when A
//   closes, B ends.
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "transports/tcp/tcp_connection.h"
#include "transports/tcp/tcp_proxy.h"

using namespace coil;
using namespace coil::transport;
using namespace coil::transport::tcp;

namespace {

constexpr size_t kMaxStreamBytes = 64 * 1024;  // per socket, well under its buffer
constexpr int kMaxRounds = 200000;            // a pump that never settles is a bug

struct Frame {
  uint32_t bytes;
  uint64_t tag;
  std::vector<uint8_t> payload;
};

/// Reference parser of one socket's stream (independent of the channel).
struct StreamModel {
  std::vector<uint8_t> bytes;
  size_t parsed = 0;        // offset of the first byte not yet in a frame
  bool badHeader = false;   // a header the receiver must refuse
  std::vector<Frame> frames;

  void append(const uint8_t* p, size_t n, uint32_t slotBytes) {
    bytes.insert(bytes.end(), p, p + n);
    while (!badHeader && bytes.size() - parsed >= sizeof(FrameHeader)) {
      FrameHeader h;
      std::memcpy(&h, bytes.data() + parsed, sizeof h);
      const bool valid = h.marker == kFrameMarker && h.bytes <= slotBytes;
      std::string why;
      FUZZ_CHECK(validateFrameHeader(h, slotBytes, &why) == valid);
      FUZZ_CHECK(valid == why.empty());
      if (!valid) {
        badHeader = true;
        break;
      }
      if (bytes.size() - parsed - sizeof h < h.bytes) break;  // payload still coming
      const uint8_t* payload = bytes.data() + parsed + sizeof h;
      frames.push_back(Frame{h.bytes, h.tag, std::vector<uint8_t>(payload, payload + h.bytes)});
      parsed += sizeof h + h.bytes;
    }
  }
  /// Bytes after the last whole frame that cannot become one: a receiver
  /// that reaches them at EOF reports a cut-off frame (or a bad header).
  bool endsDirty() const { return badHeader || parsed != bytes.size(); }
};

struct Side {
  std::shared_ptr<ProxyWaker> waker = std::make_shared<ProxyWaker>();
  std::shared_ptr<TcpChannel> channel;
};

/// One round-robin pass of the consumer: takes up to `limit` slots, checks
/// each with `check`, releases it. True if it took any.
template <typename Check>
bool consume(TcpChannel& ch, size_t* limit, Check&& check) {
  bool took = false;
  RecvSlot slot{};
  while (*limit > 0 && ch.recvFifo().tryPeek(&slot)) {
    check(slot);
    ch.recvFifo().release();
    --*limit;
    took = true;
  }
  return took;
}

/// TcpProxy::loop on this thread, until nothing moves and poll() reports
/// nothing: progress every channel, consume, then poll with a zero timeout.
template <typename Consume>
void pump(const std::vector<TcpChannel*>& channels, Consume&& consumeRound) {
  std::vector<pollfd> fds;
  std::vector<PollOwner> owners;
  for (int round = 0;; ++round) {
    FUZZ_CHECK(round < kMaxRounds);
    bool moved = false;
    for (TcpChannel* ch : channels)
      if (!ch->finished()) moved |= ch->progress();
    moved |= consumeRound();
    if (moved) continue;
    bool wants = false;
    for (TcpChannel* ch : channels) wants |= !ch->finished() && ch->wantsAttempt();
    if (wants) continue;
    fds.clear();
    owners.clear();
    for (TcpChannel* ch : channels) ch->addPollFds(fds, owners);
    if (fds.empty()) return;
    int rc = ::poll(fds.data(), fds.size(), 0);
    if (rc <= 0) return;  // settled
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents != 0) owners[i].channel->onPollEvents(owners[i].socket, fds[i].revents);
  }
}

std::vector<uint8_t> payloadFrom(fuzz::Input& in, size_t n, uint8_t seed) {
  std::vector<uint8_t> p = in.bytes(n);
  for (size_t i = p.size(); i < n; ++i) p.push_back(static_cast<uint8_t>(seed + 7 * i));
  return p;
}

void runRaw(fuzz::Input& in, uint32_t nsocks, uint32_t slotCount, uint32_t slotBytes) {
  Side side;
  std::vector<Socket> near(nsocks), far(nsocks);
  for (uint32_t i = 0; i < nsocks; ++i) fuzz::socketPair(&near[i], &far[i]);
  side.channel = std::make_shared<TcpChannel>(1, std::move(near), slotCount, slotBytes, side.waker);
  TcpChannel& ch = *side.channel;
  std::vector<StreamModel> streams(nsocks);
  uint64_t consumed = 0;

  auto check = [&](const RecvSlot& slot) {
    const StreamModel& m = streams[consumed % nsocks];
    const size_t index = consumed / nsocks;
    FUZZ_CHECK(index < m.frames.size());  // only whole, valid frames arrive
    const Frame& f = m.frames[index];
    FUZZ_CHECK(slot.bytes == f.bytes && slot.tag == f.tag);
    FUZZ_CHECK(slot.bytes <= slotBytes);
    FUZZ_CHECK(f.bytes == 0 || std::memcmp(slot.data, f.payload.data(), f.bytes) == 0);
    ++consumed;
  };
  auto pumpTaking = [&](size_t limit) {
    pump({&ch}, [&] { return consume(ch, &limit, check); });
  };
  // Writes what the socket takes now; when it is full, lets the channel read
  // (taking every slot) and tries once more. Records exactly what went out.
  auto write = [&](uint32_t s, const std::vector<uint8_t>& bytes) {
    size_t off = 0;
    bool pumped = false;
    while (off < bytes.size() && streams[s].bytes.size() < kMaxStreamBytes) {
      size_t n = std::min(bytes.size() - off, kMaxStreamBytes - streams[s].bytes.size());
      ssize_t k = ::send(far[s].fd(), bytes.data() + off, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        streams[s].append(bytes.data() + off, static_cast<size_t>(k), slotBytes);
        off += static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !pumped) {
        pumpTaking(SIZE_MAX);
        pumped = true;
        continue;
      }
      break;  // full for good (the window waits on another socket), or closed
    }
  };

  while (!in.empty()) {
    const uint8_t op = in.u8();
    const uint32_t s = (op >> 2) % nsocks;
    switch (op & 3) {
      case 0:
        write(s, in.bytes(in.u8()));
        break;
      case 1: {
        FrameHeader h{in.u16() % (slotBytes + 2), kFrameMarker, in.u8()};
        std::vector<uint8_t> frame(sizeof h);
        std::memcpy(frame.data(), &h, sizeof h);
        std::vector<uint8_t> payload = payloadFrom(in, h.bytes, static_cast<uint8_t>(h.tag));
        frame.insert(frame.end(), payload.begin(), payload.end());
        write(s, frame);
        break;
      }
      case 2:
        pumpTaking(op >> 2);
        break;
      case 3:
        pumpTaking(SIZE_MAX);
        break;
    }
  }

  // The peer is done: FIN on every socket, then run to the end.
  for (auto& f : far) ::shutdown(f.fd(), SHUT_WR);
  pumpTaking(SIZE_MAX);
  FUZZ_CHECK(ch.finished());  // both directions ended: nothing hangs
  FUZZ_CHECK(ch.recvFifo().control()->producerClosed.load() != 0);
  // The in-order prefix of whole frames the streams hold.
  uint64_t prefix = 0;
  while (prefix / nsocks < streams[prefix % nsocks].frames.size()) ++prefix;
  bool dirty = false;
  for (const auto& m : streams) dirty |= m.endsDirty();
  FUZZ_CHECK(consumed <= prefix);
  if (!dirty) FUZZ_CHECK(consumed == prefix);
}

void runLoopback(fuzz::Input& in, uint32_t nsocks, uint32_t slotCount, uint32_t slotBytes) {
  Side a, b;
  std::vector<Socket> aSocks(nsocks), bSocks(nsocks);
  for (uint32_t i = 0; i < nsocks; ++i) fuzz::socketPair(&aSocks[i], &bSocks[i]);
  a.channel = std::make_shared<TcpChannel>(1, std::move(aSocks), slotCount, slotBytes, a.waker);
  b.channel = std::make_shared<TcpChannel>(0, std::move(bSocks), slotCount, slotBytes, b.waker);
  TcpChannel& sender = *a.channel;
  TcpChannel& receiver = *b.channel;
  std::vector<Frame> sent;
  size_t received = 0;

  auto check = [&](const RecvSlot& slot) {
    FUZZ_CHECK(received < sent.size());
    const Frame& f = sent[received];
    FUZZ_CHECK(slot.bytes == f.bytes && slot.tag == f.tag);
    FUZZ_CHECK(f.bytes == 0 || std::memcmp(slot.data, f.payload.data(), f.bytes) == 0);
    ++received;
  };
  auto receive = [&] {
    size_t limit = SIZE_MAX;
    return consume(receiver, &limit, check);
  };
  auto nothing = [] { return false; };

  while (!in.empty()) {
    const uint8_t op = in.u8();
    switch (op & 3) {
      case 0: {
        Frame f{static_cast<uint32_t>(in.u16() % (slotBytes + 1)), in.u8(), {}};
        f.payload = payloadFrom(in, f.bytes, static_cast<uint8_t>(op));
        void* slot = sender.sendFifo().tryAcquire();
        if (slot == nullptr) break;  // full: the executor would wait
        if (f.bytes > 0) std::memcpy(slot, f.payload.data(), f.bytes);
        sender.sendFifo().publish(f.bytes, f.tag);
        sent.push_back(std::move(f));
        break;
      }
      case 1:
        pump({&sender}, nothing);
        break;
      case 2:
        pump({&receiver}, receive);
        break;
      case 3:
        pump({&sender, &receiver}, receive);
        break;
    }
  }
  pump({&sender, &receiver}, receive);
  FUZZ_CHECK(received == sent.size());
  FUZZ_CHECK(!receiver.finished());
  // The sender leaves: the receiver sees EOF on every socket and ends.
  sender.close();
  pump({&receiver}, receive);
  FUZZ_CHECK(receiver.finished());
  FUZZ_CHECK(receiver.recvFifo().control()->producerClosed.load() != 0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t config = in.u8();
  const uint32_t nsocks = 1 + (config & 3);
  uint32_t slotCount = 1u << (((config >> 2) & 7) % 5);  // 1..16 (kMaxSlots)
  while (slotCount < nsocks) slotCount <<= 1;
  const uint32_t slotBytes = 1 + in.u8();
  if (config & 0x20)
    runLoopback(in, nsocks, slotCount, slotBytes);
  else
    runRaw(in, nsocks, slotCount, slotBytes);
  return 0;
}
