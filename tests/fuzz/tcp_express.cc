// The tcp express path (tcp_express.h): one socket per peer, frames
// (ExpressHeader, a FrameHeader padded to 64 bytes, + payload) read through
// a 16 KiB staging buffer that may hold the start of the next message;
// checkExpressHeader decides on each header.
//
// Input: mode byte (bit 0: loopback), then operations.
// Raw mode (the peer is the fuzzer), op & 3:
//   0  write up to 255 raw bytes to the far end
//   1  write one frame: u16 length (any: larger than the stage too), tag
//      (op >> 2) % 4, payload from the input (padded)
//   2  begin a receive (when none is pending): u16 capacity, expected tag
//      (op >> 2) % 4; then advance
//   3  advance
//   then the far end shuts down (FIN) and a pending receive runs to its end.
//   Checks: the outcome of every receive (complete with its bytes and tag,
//   another tag's header, a bad marker, a message over capacity, EOF) is
//   what a reference parser finds in the bytes written, whatever the
//   chunking; payloads land byte-exactly within the caller's capacity;
//   checkExpressHeader agrees with the reference on every header.
// Loopback mode: an ExpressPath sends to another, message by message:
//   u16 length (< 20000), u8 tag; bit 7 of the tag byte: expect another
//   tag; bit 6: give one byte less capacity. Checks: what arrives is what
//   was sent (round trip through the real encoder and decoder); a tag
//   mismatch completes with the sender's header; a short buffer fails.
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "transports/tcp/tcp_express.h"

using namespace coil;
using namespace coil::transport::tcp;

namespace {

constexpr size_t kMaxStreamBytes = 128 * 1024;
constexpr int kMaxRounds = 100000;

enum class Kind { Complete, OtherTag, BadMarker, TooLarge, Eof };

struct Outcome {
  Kind kind = Kind::Eof;
  uint32_t bytes = 0;
  uint64_t tag = 0;
  std::vector<uint8_t> payload = {};
  bool operator==(const Outcome& o) const {
    return kind == o.kind && bytes == o.bytes && tag == o.tag && payload == o.payload;
  }
};

struct Request {
  size_t capacity;
  uint64_t tag;
};

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Complete: return "complete";
    case Kind::OtherTag: return "other tag";
    case Kind::BadMarker: return "bad marker";
    case Kind::TooLarge: return "too large";
    case Kind::Eof: return "eof";
  }
  return "?";
}

/// What the receiver must make of `requests` over the whole `stream`.
std::vector<Outcome> reference(const std::vector<uint8_t>& stream,
                               const std::vector<Request>& requests) {
  std::vector<Outcome> out;
  size_t pos = 0;
  for (const Request& r : requests) {
    if (stream.size() - pos < sizeof(ExpressHeader)) {
      out.push_back({Kind::Eof});
      break;
    }
    FrameHeader h;
    std::memcpy(&h, stream.data() + pos, sizeof h);
    pos += sizeof(ExpressHeader);
    Kind kind = h.marker != kFrameMarker ? Kind::BadMarker
                : h.tag != r.tag         ? Kind::OtherTag
                : h.bytes > r.capacity   ? Kind::TooLarge
                                         : Kind::Complete;
    static const ExpressHeaderVerdict kVerdict[] = {
        ExpressHeaderVerdict::kAccept, ExpressHeaderVerdict::kOtherTag,
        ExpressHeaderVerdict::kBadMarker, ExpressHeaderVerdict::kTooLarge};
    FUZZ_CHECK(checkExpressHeader(h, r.tag, r.capacity) == kVerdict[static_cast<int>(kind)]);
    if (kind == Kind::BadMarker || kind == Kind::TooLarge) {
      out.push_back({kind});
      break;
    }
    if (kind == Kind::OtherTag) {  // header only; its payload stays unread
      out.push_back({kind, h.bytes, h.tag, {}});
      continue;
    }
    if (stream.size() - pos < h.bytes) {
      out.push_back({Kind::Eof});
      break;
    }
    out.push_back({kind, h.bytes, h.tag,
                   std::vector<uint8_t>(stream.data() + pos, stream.data() + pos + h.bytes)});
    pos += h.bytes;
  }
  return out;
}

/// A receive in progress: the caller's buffer is exactly `capacity` bytes
/// (new[]: an overflow is an ASan report).
struct Receive {
  std::unique_ptr<uint8_t[]> buffer;
  Request request;
};

/// The outcome of `r` on `path` if it ended, else false.
bool ended(const ExpressPath& path, const Receive& r, Outcome* out) {
  const std::string& failure = path.failure();
  if (!failure.empty()) {
    if (failure.find("bad express frame marker") != std::string::npos) *out = {Kind::BadMarker};
    else if (failure.find("were expected") != std::string::npos) *out = {Kind::TooLarge};
    else if (failure.find("closed its connection") != std::string::npos) *out = {Kind::Eof};
    else {
      std::fprintf(stderr, "unexpected failure: %s\n", failure.c_str());
      FUZZ_CHECK(!"a known failure");
    }
    return true;
  }
  size_t bytes = 0;
  uint64_t tag = 0;
  if (!path.recvComplete(&bytes, &tag)) return false;
  if (tag != r.request.tag) {
    *out = {Kind::OtherTag, static_cast<uint32_t>(bytes), tag, {}};
  } else {
    FUZZ_CHECK(bytes <= r.request.capacity);
    *out = {Kind::Complete, static_cast<uint32_t>(bytes), tag,
            std::vector<uint8_t>(r.buffer.get(), r.buffer.get() + bytes)};
  }
  return true;
}

std::vector<uint8_t> payloadFrom(fuzz::Input& in, size_t n, uint8_t seed) {
  std::vector<uint8_t> p = in.bytes(std::min<size_t>(n, 512));
  for (size_t i = p.size(); i < n; ++i) p.push_back(static_cast<uint8_t>(seed + 13 * i));
  return p;
}

void runRaw(fuzz::Input& in) {
  Socket near, far;
  fuzz::socketPair(&near, &far);
  ExpressPath path(1, std::move(near));
  std::vector<uint8_t> stream;
  std::vector<Request> requests;
  std::vector<Outcome> outcomes;
  std::unique_ptr<Receive> pending;
  bool failed = false;

  auto settle = [&] {
    Outcome o{Kind::Eof};
    if (pending && ended(path, *pending, &o)) {
      outcomes.push_back(std::move(o));
      failed = !path.failure().empty();
      pending.reset();
    }
  };
  auto write = [&](const std::vector<uint8_t>& bytes) {
    size_t off = 0;
    bool advanced = false;
    while (off < bytes.size() && stream.size() < kMaxStreamBytes) {
      size_t n = std::min(bytes.size() - off, kMaxStreamBytes - stream.size());
      ssize_t k = ::send(far.fd(), bytes.data() + off, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        stream.insert(stream.end(), bytes.data() + off, bytes.data() + off + k);
        off += static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !advanced && pending) {
        path.advance();
        settle();
        advanced = true;
        continue;
      }
      break;
    }
  };

  while (!in.empty() && !failed) {
    const uint8_t op = in.u8();
    const uint64_t tag = (op >> 2) % 4;
    switch (op & 3) {
      case 0:
        write(in.bytes(in.u8()));
        break;
      case 1: {
        ExpressHeader header{};
        header.frame = FrameHeader{in.u16(), kFrameMarker, tag};
        const FrameHeader& h = header.frame;
        std::vector<uint8_t> frame(sizeof header);
        std::memcpy(frame.data(), &header, sizeof header);
        std::vector<uint8_t> payload = payloadFrom(in, h.bytes, static_cast<uint8_t>(op));
        frame.insert(frame.end(), payload.begin(), payload.end());
        write(frame);
        break;
      }
      case 2:
        if (!pending) {
          const size_t capacity = in.u16();
          pending = std::make_unique<Receive>(
              Receive{std::make_unique<uint8_t[]>(capacity), Request{capacity, tag}});
          path.beginRecv(pending->buffer.get(), capacity, tag);
          requests.push_back(pending->request);
        }
        path.advance();
        settle();
        break;
      case 3:
        path.advance();
        settle();
        break;
    }
  }

  // The peer is done; a pending receive must now end, one way or another.
  ::shutdown(far.fd(), SHUT_WR);
  for (int round = 0; pending; ++round) {
    FUZZ_CHECK(round < kMaxRounds);
    path.advance();
    settle();
  }
  std::vector<Outcome> expected = reference(stream, requests);
  if (!(outcomes == expected)) {
    std::fprintf(stderr, "receive outcomes differ from the reference (%zu vs %zu):\n",
                 outcomes.size(), expected.size());
    for (size_t i = 0; i < std::max(outcomes.size(), expected.size()); ++i)
      std::fprintf(stderr, "  %zu: %s / %s\n", i,
                   i < outcomes.size() ? kindName(outcomes[i].kind) : "-",
                   i < expected.size() ? kindName(expected[i].kind) : "-");
    FUZZ_CHECK(outcomes == expected);
  }
}

void runLoopback(fuzz::Input& in) {
  Socket x, y;
  fuzz::socketPair(&x, &y);
  ExpressPath sender(1, std::move(x));
  ExpressPath receiver(0, std::move(y));
  while (!in.empty()) {
    const size_t bytes = in.u16() % 20000;
    const uint8_t tagByte = in.u8();
    const uint64_t tag = tagByte & 0x3f;
    const uint64_t expectTag = (tagByte & 0x80) ? tag + 1 : tag;
    const size_t capacity = (tagByte & 0x40) && bytes > 0 ? bytes - 1 : bytes;
    std::vector<uint8_t> message = payloadFrom(in, bytes, tagByte);
    auto buffer = std::make_unique<uint8_t[]>(capacity);
    sender.beginSend(message.data(), message.size(), tag);
    receiver.beginRecv(buffer.get(), capacity, expectTag);
    size_t gotBytes = 0;
    uint64_t gotTag = 0;
    for (int round = 0;; ++round) {
      FUZZ_CHECK(round < kMaxRounds);
      sender.advance();
      receiver.advance();
      FUZZ_CHECK(sender.failure().empty());
      if (!receiver.failure().empty() || receiver.recvComplete(&gotBytes, &gotTag)) break;
    }
    if (expectTag != tag) {  // the header only, then the stream is another call's
      FUZZ_CHECK(receiver.failure().empty());
      FUZZ_CHECK(gotBytes == bytes && gotTag == tag);
      return;
    }
    if (capacity < bytes) {
      FUZZ_CHECK(receiver.failure().find("were expected") != std::string::npos);
      return;
    }
    FUZZ_CHECK(receiver.failure().empty());
    FUZZ_CHECK(gotBytes == bytes && gotTag == tag);
    FUZZ_CHECK(bytes == 0 || std::memcmp(buffer.get(), message.data(), bytes) == 0);
    for (int round = 0; !sender.sendComplete(); ++round) {
      FUZZ_CHECK(round < kMaxRounds);
      sender.advance();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  if (in.u8() & 1)
    runLoopback(in);
  else
    runRaw(in);
  return 0;
}
