// Writes the seed corpus of every fuzz target (corpus/<target>/<name>):
// valid messages produced by coil's own encoders, plus a few edge cases
// each. Run by `tools/run-fuzz --seeds`; the output is committed.
//
//   fuzz_make_seeds DIR
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "net/auth.h"
#include "bootstrap/bootstrap.h"
#include "net/sha256.h"
#include "bootstrap/wire.h"
#include "fuzz_util.h"
#include "transports/tcp/tcp_connection.h"
#include "transports/tcp/tcp_express.h"
#include "transports/tcp/tcp_proxy.h"

using namespace coil;
using namespace coil::transport;
using namespace coil::transport::tcp;

namespace {

std::string outDir;
int written = 0;

/// Bytes built front to back, in the order fuzz::Input reads them.
struct Bytes {
  std::vector<uint8_t> b;
  Bytes& u8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Bytes& u16(uint16_t v) { return u8(static_cast<uint8_t>(v >> 8)).u8(static_cast<uint8_t>(v)); }
  Bytes& raw(const void* p, size_t n) {
    const auto* q = static_cast<const uint8_t*>(p);
    b.insert(b.end(), q, q + n);
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& v) { return raw(v.data(), v.size()); }
  Bytes& text(const std::string& s) { return raw(s.data(), s.size()); }
};

void save(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string dir = outDir + "/" + target;
  mkdir(outDir.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
  ++written;
}

std::vector<uint8_t> addressBytes(const SocketAddress& a) {
  std::vector<uint8_t> p(wire::kAddressBytes);
  wire::putAddress(p.data(), a);
  return p;
}

std::vector<uint8_t> helloBytes(int rank, int nranks, const char* listener) {
  std::vector<uint8_t> p(wire::kHelloBytes);
  wire::putHello(p.data(), wire::Hello{rank, nranks, SocketAddress::parse(listener)});
  return p;
}

void bootstrapSeeds() {
  const std::string t = "bootstrap_hello";
  save(t, "ipv4", helloBytes(0, 4, "10.0.0.1:29500"));
  save(t, "ipv4-rank-3", helloBytes(3, 4, "192.168.7.20:41234"));
  save(t, "ipv6-loopback", helloBytes(1, 2, "[::1]:29501"));
  save(t, "ipv6-scoped", helloBytes(0, 2, "[fe80::1%1]:29501"));
  save(t, "ipv4-mapped", helloBytes(0, 1, "[::ffff:10.1.2.3]:80"));
  save(t, "rank-out-of-range", helloBytes(-1, 0, "127.0.0.1:1"));  // decodes; the root refuses
  auto h = helloBytes(0, 4, "10.0.0.1:29500");
  h[0] ^= 0x80;
  save(t, "bad-magic", h);
  h = helloBytes(0, 4, "10.0.0.1:29500");
  h[12 + 5] = 1;  // IPv4 with a non-zero scope byte
  save(t, "ipv4-nonzero-padding", h);
  h = helloBytes(0, 4, "10.0.0.1:29500");
  h[12 + 1] = 5;  // family tag 5
  save(t, "bad-family", h);
  h.resize(wire::kHelloBytes - 1);
  save(t, "short", h);

  const std::string r = "bootstrap_reply";
  auto reply = [](uint16_t nrankSel, uint32_t code, const std::vector<uint8_t>& payload,
                  uint32_t length) {
    Bytes b;
    b.u16(nrankSel);
    uint8_t header[wire::kReplyHeaderBytes];
    wire::putReplyHeader(header, wire::ReplyHeader{code, length});
    b.raw(header, sizeof header).raw(payload);
    return b.b;
  };
  std::vector<uint8_t> table;
  for (const char* a : {"10.0.0.1:40001", "10.0.0.2:40002", "[::1]:40003"}) {
    auto p = addressBytes(SocketAddress::parse(a));
    table.insert(table.end(), p.begin(), p.end());
  }
  save(r, "table-3-ranks", reply(2, coilSuccess, table, static_cast<uint32_t>(table.size())));
  std::vector<uint8_t> one(table.begin(), table.begin() + wire::kAddressBytes);
  save(r, "table-1-rank", reply(0, coilSuccess, one, wire::kAddressBytes));
  const std::string text = "ranks disagree on nranks: rank 1 says 3, rank 0 says 4";
  std::vector<uint8_t> textBytes(text.begin(), text.end());
  save(r, "error-text", reply(0, coilInvalidUsage, textBytes, static_cast<uint32_t>(text.size())));
  save(r, "error-unknown-code", reply(0, 1000, textBytes, static_cast<uint32_t>(text.size())));
  save(r, "error-too-long", reply(0, coilTimeout, {}, wire::kMaxErrorTextBytes + 1));
  save(r, "table-wrong-length", reply(2, coilSuccess, table, 2 * wire::kAddressBytes));
  auto cut = reply(2, coilSuccess, table, static_cast<uint32_t>(table.size()));
  cut.resize(cut.size() - 5);
  save(r, "table-cut-off", cut);
  auto bad = reply(2, coilSuccess, table, static_cast<uint32_t>(table.size()));
  bad[2 + wire::kReplyHeaderBytes + wire::kAddressBytes + 1] = 9;  // rank 1: family tag 9
  save(r, "table-bad-address", bad);
}

std::vector<uint8_t> idBytes(uint8_t mode, const UniqueIdData& d) {
  coilUniqueId id = encodeUniqueId(d);
  Bytes b;
  b.u8(mode).raw(id.internal, sizeof id.internal);
  return b.b;
}

void uniqueIdSeeds() {
  const std::string t = "unique_id";
  UniqueIdData d;
  d.root = SocketAddress::parse("10.0.0.1:29500");
  for (size_t i = 0; i < sizeof d.secret; ++i) d.secret[i] = static_cast<uint8_t>(17 * i + 3);
  d.nonce = 0x0123456789abcdefull;
  save(t, "ipv4", idBytes(0, d));
  d.root = SocketAddress::parse("[fe80::2%1]:29400");
  save(t, "ipv6-scoped", idBytes(0, d));
  d.rootHostedByRank0 = true;
  save(t, "hosted-by-rank-0", idBytes(4, d));
  save(t, "fixed-root", idBytes(0, uniqueIdForFixedRoot(SocketAddress::parse("127.0.0.1:29500"),
                                                       "job-42")));
  auto v = idBytes(0, d);
  v[1 + 40] ^= 1;  // a secret bit flipped: checksum mismatch
  save(t, "corrupted", v);
  v = idBytes(1, d);
  v[1 + 7] |= 2;  // unknown flag, checksum fixed by mode bit 0
  save(t, "unknown-flag", v);
  v = idBytes(1, d);
  v[1 + 5] = 2;  // version 2
  save(t, "version-2", v);
  v = idBytes(0, d);
  v[1 + 100] = 1;  // reserved byte set
  save(t, "reserved-set", v);
  v = idBytes(1, d);
  v[1 + 9] = 7;  // root family tag 7
  save(t, "bad-root-address", v);
}

void commIdSeeds() {
  const std::string t = "comm_id_text";
  const char* texts[][2] = {
      {"ipv4", "127.0.0.1:29500"},       {"ipv4-max-port", "10.0.0.1:65535"},
      {"ipv6", "[::1]:29500"},           {"ipv6-scoped", "[fe80::1%1]:1"},
      {"ipv6-scope-name", "[fe80::1%lo]:2"}, {"ipv4-mapped", "[::ffff:1.2.3.4]:5"},
      {"short-ipv4", "1:2"},             {"host-name", "node0:29500"},
      {"port-too-big", "1.2.3.4:65536"}, {"port-6-digits", "1.2.3.4:000080"},
      {"no-port", "1.2.3.4:"},           {"no-host", ":80"},
      {"ipv6-no-brackets", "::1:80"},    {"ipv6-no-colon", "[::1]80"},
      {"ipv6-unclosed", "[::1:80"},      {"empty-brackets", "[]:1"},
  };
  for (const auto& [name, text] : texts) save(t, name, Bytes().text(text).b);
}

void authSeeds() {
  const std::string t = "auth_handshake";
  int n = 0;
  for (const char* purpose : {"root", "ring", "tcp-data"}) {
    for (uint8_t mode : {0, 1, 3, 7}) {
      Bytes b;
      for (int i = 0; i < 16; ++i) b.u8(static_cast<uint8_t>(i * 5 + n));
      b.u8(static_cast<uint8_t>(std::strlen(purpose))).text(purpose).u8(mode);
      // Nonces and MACs: fixed pseudo-random bytes (the seeds stay the same
      // from one generation to the next).
      Sha256Digest s1 = sha256(&n, sizeof n), s2 = sha256(s1.data(), s1.size());
      Sha256Digest c1 = sha256(s2.data(), s2.size()), c2 = sha256(c1.data(), c1.size());
      b.raw(s1.data(), 16).raw(s2.data(), 32);           // server: nonceS, reply
      b.raw(c1.data(), 16).raw(c2.data(), 32);           // client: nonceC, MAC
      b.u8(static_cast<uint8_t>(n * 7));
      save(t, std::string(purpose) + "-mode-" + std::to_string(mode), b.b);
      ++n;
    }
  }
  Bytes shortServer;
  shortServer.raw(std::vector<uint8_t>(16, 1)).u8(4).text("root").u8(0).raw(
      std::vector<uint8_t>(10, 2));
  save(t, "server-closes-early", shortServer.b);
}

// ---- tcp: the bytes a real sender puts on the wire ----------------------

/// Runs `ch` (and reads the far ends) until nothing moves.
void drive(TcpChannel& ch) {
  for (int i = 0; i < 10000 && ch.progress(); ++i) {
  }
}

/// The bytes a TcpChannel writes on each of its `nsocks` sockets for these
/// slots (bytes, tag), with payload byte i of slot k = k * 31 + i.
std::vector<std::vector<uint8_t>> tcpWire(uint32_t nsocks, uint32_t slotCount, uint32_t slotBytes,
                                          const std::vector<std::pair<uint32_t, uint64_t>>& slots) {
  std::vector<Socket> near(nsocks), far(nsocks);
  for (uint32_t i = 0; i < nsocks; ++i) fuzz::socketPair(&near[i], &far[i]);
  auto waker = std::make_shared<ProxyWaker>();
  TcpChannel ch(1, std::move(near), slotCount, slotBytes, waker);
  std::vector<std::vector<uint8_t>> out(nsocks);
  size_t k = 0;
  while (k < slots.size()) {
    auto* slot = static_cast<uint8_t*>(ch.sendFifo().tryAcquire());
    if (slot == nullptr) {
      drive(ch);
      continue;
    }
    for (uint32_t i = 0; i < slots[k].first; ++i) slot[i] = static_cast<uint8_t>(k * 31 + i);
    ch.sendFifo().publish(slots[k].first, slots[k].second);
    ++k;
  }
  drive(ch);
  for (uint32_t i = 0; i < nsocks; ++i) {
    auto bytes = fuzz::readAvailable(far[i]);
    out[i].insert(out[i].end(), bytes.begin(), bytes.end());
  }
  return out;
}

/// A tcp_frames raw-mode script that writes `wire` in chunks of up to
/// `chunk` bytes, alternating sockets, pumping between chunks.
std::vector<uint8_t> framesScript(uint8_t config, uint32_t slotBytes,
                                  const std::vector<std::vector<uint8_t>>& wire, size_t chunk) {
  Bytes b;
  b.u8(config).u8(static_cast<uint8_t>(slotBytes - 1));
  std::vector<size_t> off(wire.size(), 0);
  bool more = true;
  while (more) {
    more = false;
    for (size_t s = 0; s < wire.size(); ++s) {
      size_t n = std::min(chunk, wire[s].size() - off[s]);
      if (n == 0) continue;
      b.u8(static_cast<uint8_t>(s << 2)).u8(static_cast<uint8_t>(n));
      b.raw(wire[s].data() + off[s], n);
      off[s] += n;
      more = true;
      b.u8(3);  // pump, taking every slot
    }
  }
  return b.b;
}

void tcpFramesSeeds() {
  const std::string t = "tcp_frames";
  // config: nsocks - 1 in bits 0-1, log2(slots) in bits 2-4, loopback bit 5.
  auto wire1 = tcpWire(1, 4, 64, {{0, 100}, {5, 101}, {64, 102}, {1, 103}});
  save(t, "one-socket", framesScript(0x00 | (2 << 2), 64, wire1, 255));
  save(t, "one-socket-small-chunks", framesScript(0x00 | (2 << 2), 64, wire1, 7));
  auto wire2 = tcpWire(2, 4, 32, {{5, 1}, {0, 2}, {32, 3}, {17, 4}, {9, 5}, {1, 6}});
  save(t, "two-sockets", framesScript(0x01 | (2 << 2), 32, wire2, 255));
  save(t, "two-sockets-chunks", framesScript(0x01 | (2 << 2), 32, wire2, 13));
  auto wire4 = tcpWire(4, 8, 16, {{16, 9}, {3, 8}, {0, 7}, {16, 6}, {2, 5}, {1, 4}, {0, 3}});
  save(t, "four-sockets", framesScript(0x03 | (3 << 2), 16, wire4, 255));
  // Edge cases: a bad marker, an oversized frame, a frame cut off at EOF.
  auto bad = wire1;
  bad[0][4] ^= 0xff;
  save(t, "bad-marker", framesScript(0x00 | (2 << 2), 64, bad, 255));
  auto big = wire1;
  save(t, "oversized", framesScript(0x00 | (2 << 2), 63, big, 255));  // 64-byte frame, 63-byte slots
  auto cut = wire2;
  cut[1].resize(cut[1].size() - 3);
  save(t, "cut-off", framesScript(0x01 | (2 << 2), 32, cut, 255));
  // Frames through op 1, a consumer that lags (op 2 with a limit), loopback.
  Bytes ops;
  ops.u8(0x01 | (1 << 2)).u8(31);
  for (int k = 0; k < 6; ++k) ops.u8(static_cast<uint8_t>(((k % 2) << 2) | 1)).u16(static_cast<uint16_t>(k * 6)).u8(static_cast<uint8_t>(k));
  ops.u8((1 << 2) | 2).u8(3);
  save(t, "frame-ops-lagging-consumer", ops.b);
  Bytes loop;
  loop.u8(0x20 | 0x01 | (2 << 2)).u8(63);
  for (int k = 0; k < 6; ++k) loop.u8(0).u16(static_cast<uint16_t>(k * 13)).u8(static_cast<uint8_t>(k));
  loop.u8(1).u8(2).u8(0).u16(64).u8(9).u8(3);
  save(t, "loopback", loop.b);
}

/// The bytes an ExpressPath writes for these messages (payload byte i of
/// message k = k * 31 + i).
std::vector<uint8_t> expressWire(const std::vector<std::pair<uint32_t, uint64_t>>& messages) {
  Socket near, far;
  fuzz::socketPair(&near, &far);
  ExpressPath sender(1, std::move(near));
  std::vector<uint8_t> out;
  for (size_t k = 0; k < messages.size(); ++k) {
    std::vector<uint8_t> data(messages[k].first);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(k * 31 + i);
    sender.beginSend(data.data(), data.size(), messages[k].second);
    while (!sender.sendComplete()) {
      sender.advance();
      auto bytes = fuzz::readAvailable(far);
      out.insert(out.end(), bytes.begin(), bytes.end());
    }
  }
  auto bytes = fuzz::readAvailable(far);
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}

/// A tcp_express raw-mode script: the receives (capacity, tag % 4) begin
/// first or after the bytes, which go in chunks of up to `chunk`.
std::vector<uint8_t> expressScript(const std::vector<uint8_t>& wire, size_t chunk,
                                   const std::vector<std::pair<uint16_t, uint8_t>>& receives,
                                   bool receiveFirst) {
  Bytes b;
  b.u8(0);
  size_t next = 0;
  auto receive = [&] {
    if (next < receives.size()) {
      b.u8(static_cast<uint8_t>((receives[next].second << 2) | 2)).u16(receives[next].first);
      ++next;
    }
  };
  if (receiveFirst) receive();
  for (size_t off = 0; off < wire.size(); off += chunk) {
    size_t n = std::min(chunk, wire.size() - off);
    b.u8(0).u8(static_cast<uint8_t>(n)).raw(wire.data() + off, n);
    receive();
  }
  while (next < receives.size()) receive();
  return b.b;
}

void tcpExpressSeeds() {
  const std::string t = "tcp_express";
  auto wire = expressWire({{8, 1}, {0, 2}, {100, 3}, {3, 0}});
  std::vector<std::pair<uint16_t, uint8_t>> fit = {{8, 1}, {0, 2}, {100, 3}, {3, 0}};
  save(t, "messages", expressScript(wire, 255, fit, true));
  save(t, "messages-small-chunks", expressScript(wire, 5, fit, true));
  save(t, "messages-read-ahead", expressScript(wire, 255, fit, false));
  save(t, "other-tag", expressScript(wire, 255, {{8, 1}, {0, 3}}, true));
  save(t, "too-large", expressScript(wire, 255, {{7, 1}}, true));
  auto bad = wire;
  bad[4] ^= 1;
  save(t, "bad-marker", expressScript(bad, 255, fit, true));
  auto cut = wire;
  cut.resize(cut.size() - 2);
  save(t, "cut-off", expressScript(cut, 255, fit, true));
  // Bigger than the 16 KiB stage, through op 1.
  Bytes big;
  big.u8(0).u8((1 << 2) | 2).u16(20000).u8((1 << 2) | 1).u16(17000).u8(3).u8(3);
  save(t, "larger-than-stage", big.b);
  Bytes loop;
  loop.u8(1).u16(10).u8(5).u16(0).u8(6).u16(3000).u8(7).u16(18000).u8(8).u16(4).u8(0x49);
  save(t, "loopback", loop.b);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR (writes DIR/<target>/<seed>)\n", argv[0]);
    return 2;
  }
  fuzz::init();
  outDir = argv[1];
  bootstrapSeeds();
  uniqueIdSeeds();
  commIdSeeds();
  authSeeds();
  tcpFramesSeeds();
  tcpExpressSeeds();
  std::printf("fuzz_make_seeds: wrote %d seeds under %s\n", written, outDir.c_str());
  return 0;
}
