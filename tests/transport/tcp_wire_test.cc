// The tcp wire format and failure handling, checked against frames written
// and read by hand: a TcpChannel runs over socketpairs whose far ends the
// test plays as the peer, so every byte on the wire is visible.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/error.h"
#include "transports/tcp/tcp_connection.h"
#include "transports/tcp/tcp_proxy.h"

namespace coil::transport::tcp {
namespace {

constexpr uint32_t kSlotBytes = 64;

WaitWatch watch(int64_t ms = 10000) { return WaitWatch{Deadline::after(ms), nullptr}; }

/// A channel whose peer is the test: far[i] is the other end of socket i.
struct Wire {
  std::unique_ptr<TcpProxy> proxy = std::make_unique<TcpProxy>(0);
  std::shared_ptr<TcpChannel> channel;
  std::vector<Socket> far;

  Wire(int nsocks, uint32_t slots) {
    std::vector<Socket> near;
    for (int i = 0; i < nsocks; ++i) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        throw std::runtime_error("socketpair failed");
      near.emplace_back(sv[0]);
      far.emplace_back(sv[1]);
    }
    channel = std::make_shared<TcpChannel>(1, std::move(near), slots, kSlotBytes, proxy->waker());
    proxy->add({channel});
  }
  ~Wire() { proxy->stop(); }

  void writeFrame(int socket, uint32_t bytes, uint64_t tag, uint32_t marker = kFrameMarker,
                  size_t payloadBytes = SIZE_MAX) {
    FrameHeader h{bytes, marker, tag};
    std::vector<uint8_t> frame(sizeof h + (payloadBytes == SIZE_MAX ? bytes : payloadBytes));
    std::memcpy(frame.data(), &h, sizeof h);
    for (size_t i = sizeof h; i < frame.size(); ++i) frame[i] = static_cast<uint8_t>(tag + i);
    far[size_t(socket)].sendAll(frame.data(), frame.size(), Deadline::after(10000));
  }
  /// Peeks the next slot and checks it is frame `tag` of `bytes` bytes.
  void expectSlot(uint32_t bytes, uint64_t tag) {
    RecvSlot s{};
    WaitFailure why{};
    ASSERT_TRUE(channel->recvFifo().peek(&s, watch(), &why)) << "tag " << tag;
    EXPECT_EQ(s.bytes, bytes);
    EXPECT_EQ(s.tag, tag);
    const auto* p = static_cast<const uint8_t*>(s.data);
    for (uint32_t i = 0; i < s.bytes; ++i)
      ASSERT_EQ(p[i], static_cast<uint8_t>(tag + sizeof(FrameHeader) + i)) << "byte " << i;
    channel->recvFifo().release();
    channel->kick();
  }
  void expectClosedRecv() {
    RecvSlot s{};
    WaitFailure why{};
    auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(channel->recvFifo().peek(&s, watch(), &why));
    EXPECT_EQ(why, WaitFailure::PeerClosed);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  }
  /// The channel shut the far end down: reading it ends in EOF, not a timeout.
  void expectFarEof(int socket) {
    uint8_t b;
    try {
      for (;;) far[size_t(socket)].recvAll(&b, 1, Deadline::after(5000));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), coilRemoteError) << e.what();
    }
  }
};

TEST(TcpWire, FramesArePublishedInOrderAcrossSockets) {
  Wire w(2, 4);
  // Frame 1 (socket 1) arrives first: nothing is published until frame 0.
  w.writeFrame(1, 5, 101);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  RecvSlot s{};
  EXPECT_FALSE(w.channel->recvFifo().tryPeek(&s));
  w.writeFrame(0, 0, 100);  // a zero-byte frame
  w.expectSlot(0, 100);
  w.expectSlot(5, 101);
  // More frames than slots, all sizes up to the slot size.
  std::thread writer([&] {
    for (uint32_t k = 2; k < 40; ++k) w.writeFrame(int(k % 2), k % (kSlotBytes + 1), 100 + k);
  });
  for (uint32_t k = 2; k < 40; ++k) w.expectSlot(k % (kSlotBytes + 1), 100 + k);
  writer.join();
}

TEST(TcpWire, PublishedSlotsLeaveAsFramesOnTheirSockets) {
  Wire w(3, 4);
  constexpr uint32_t kFrames = 20;
  std::thread producer([&] {
    for (uint32_t k = 0; k < kFrames; ++k) {
      WaitFailure why{};
      auto* slot = static_cast<uint8_t*>(w.channel->sendFifo().acquire(watch(), &why));
      ASSERT_NE(slot, nullptr);
      uint32_t bytes = (k * 7) % (kSlotBytes + 1);
      for (uint32_t i = 0; i < bytes; ++i) slot[i] = static_cast<uint8_t>(k * 31 + i);
      w.channel->sendFifo().publish(bytes, 0xabc00 + k);
      w.channel->kick();
    }
  });
  // Read socket by socket, round-robin: frame k must be on socket k % 3.
  for (uint32_t k = 0; k < kFrames; ++k) {
    FrameHeader h{};
    w.far[k % 3].recvAll(&h, sizeof h, Deadline::after(10000));
    ASSERT_EQ(h.marker, kFrameMarker);
    ASSERT_EQ(h.tag, 0xabc00u + k);
    ASSERT_EQ(h.bytes, (k * 7) % (kSlotBytes + 1));
    std::vector<uint8_t> payload(h.bytes);
    if (h.bytes) w.far[k % 3].recvAll(payload.data(), h.bytes, Deadline::after(10000));
    for (uint32_t i = 0; i < h.bytes; ++i) ASSERT_EQ(payload[i], static_cast<uint8_t>(k * 31 + i));
  }
  producer.join();
}

TEST(TcpWire, OversizedFrameIsAProtocolError) {
  Wire w(1, 2);
  w.writeFrame(0, kSlotBytes + 1, 7);
  w.expectClosedRecv();
  w.expectFarEof(0);
  // The send side is over too: acquiring past the free slots fails at once.
  WaitFailure why{};
  for (int i = 0; i < 3 && w.channel->sendFifo().acquire(watch(2000), &why); ++i) w.channel->sendFifo().publish(0, 0);
  EXPECT_EQ(why, WaitFailure::PeerClosed);
}

TEST(TcpWire, BadMarkerIsAProtocolError) {
  Wire w(2, 2);
  w.writeFrame(0, 4, 7, 0xdeadbeef);
  w.expectClosedRecv();
  w.expectFarEof(1);  // every socket of the connection is shut
}

TEST(TcpWire, EofInsideAFrameEndsTheConnection) {
  Wire w(1, 2);
  w.writeFrame(0, 10, 7, kFrameMarker, 5);  // header promises 10 bytes, 5 come
  w.far[0].shutdownBoth();
  w.expectClosedRecv();
}

TEST(TcpWire, CompleteFramesBeforeACleanEofAreDelivered) {
  Wire w(2, 4);
  w.writeFrame(0, 3, 1);
  w.writeFrame(1, 4, 2);
  w.writeFrame(0, 5, 3);
  for (auto& s : w.far) s.shutdownBoth();
  w.expectSlot(3, 1);
  w.expectSlot(4, 2);
  w.expectSlot(5, 3);
  w.expectClosedRecv();
}

TEST(TcpWire, LocalCloseShutsTheSocketsAndEndsLocalWaits) {
  Wire w(2, 2);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    w.channel->close();
    w.channel->close();
  });
  w.expectClosedRecv();
  closer.join();
  w.expectFarEof(0);
  w.expectFarEof(1);
}

TEST(TcpWire, ProxyStopEndsWaits) {
  Wire w(1, 2);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    w.proxy->stop();
  });
  w.expectClosedRecv();
  stopper.join();
  EXPECT_THROW(w.proxy->add({w.channel}), Error);
}

}  // namespace
}  // namespace coil::transport::tcp
