// StagedStream (src/device/staged_stream.h) on a fake GPU made of host
// threads (fake_device.h): the host side of the device path, which a
// machine without a GPU can still check. Stream order, the staging layout
// (in place, overlapping, in the pinned block and through it), failures,
// calls on a hardware queue that every stream shares, drain,
// and that no CUDA memory is allocated while a stream waits.
#include "device/staged_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "core/error.h"
#include "tests/device/fake_device.h"

namespace coil::device {
namespace {

using namespace std::chrono_literals;

// A block of fake device memory.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t n) : n_(n), p_(static_cast<uint8_t*>(allocDevice(n))) {
    for (size_t i = 0; i < n; ++i) p_[i] = static_cast<uint8_t>(i * 7 + 3);
  }
  ~DeviceBytes() { freeDevice(p_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  uint8_t* get() const { return p_; }
  size_t size() const { return n_; }
  std::vector<uint8_t> snapshot() const { return std::vector<uint8_t>(p_, p_ + n_); }

 private:
  size_t n_;
  uint8_t* p_;
};

// Holds a stream back until open() (a stream operation that blocks).
class Gate {
 public:
  void hold(Stream s) {
    fake::enqueueHostWork(s, [this] {
      while (!open_.load()) std::this_thread::sleep_for(100us);
    });
  }
  void open() { open_ = true; }

 private:
  std::atomic<bool> open_{false};
};

struct Errors {
  std::mutex m;
  std::vector<std::string> messages;
  StagedStream::OnError sink() {
    return [this](const Error& e) {
      std::lock_guard<std::mutex> lock(m);
      messages.push_back(e.what());
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(m);
    return messages.size();
  }
};

// What the stream sees once it gets past everything queued on it so far.
std::vector<uint8_t> readInStreamOrder(Stream s, const DeviceBytes& b) {
  std::vector<uint8_t> seen;
  fake::enqueueHostWork(s, [&] { seen = b.snapshot(); });
  syncStream(s);
  return seen;
}

// Adds `delta` to every staged byte of [p, p + n).
StagedStream::Body addTo(const void* p, size_t n, int delta, std::atomic<int>* ran = nullptr) {
  return [=](const StagedStream::HostOf& hostOf) {
    auto* h = static_cast<uint8_t*>(hostOf(p));
    ASSERT_NE(h, nullptr);
    for (size_t i = 0; i < n; ++i) h[i] = static_cast<uint8_t>(h[i] + delta);
    if (ran) ++*ran;
  };
}

std::vector<uint8_t> plus(std::vector<uint8_t> v, int delta) {
  for (auto& x : v) x = static_cast<uint8_t>(x + delta);
  return v;
}

// Runs `fn`; if it has not returned within `limit`, the test fails and the
// process ends: its threads are stuck in a deadlock that no test can undo.
void mustFinishWithin(std::chrono::seconds limit, const char* what, const std::function<void()>& fn) {
  std::packaged_task<void()> task(fn);
  std::future<void> done = task.get_future();
  std::thread runner(std::move(task));
  if (done.wait_for(limit) == std::future_status::timeout) {
    std::fprintf(stderr, "FAILED: %s did not finish within %lld s: a deadlock\n", what,
                 static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::_Exit(1);
  }
  runner.join();
  done.get();
}

class StagedStreamTest : public ::testing::TestWithParam<size_t> {  // the pinned staging bytes
 protected:
  void SetUp() override {
    fake::resetCounters();
    s = createStream();
  }
  void TearDown() override {
    destroyStream(s);
    EXPECT_EQ(fake::allocationsWhileWaiting(), 0)
        << "CUDA memory was allocated or freed while a stream waited on a word";
  }

  Errors errors;
  Stream s = nullptr;  // the callers' stream
};

TEST_P(StagedStreamTest, ACallReturnsAtOnceAndItsStreamSeesTheResult) {
  {
    StagedStream staged(0, errors.sink(), GetParam());
    for (size_t n : {size_t{1}, size_t{4096}, size_t{3 << 20} + 13, (size_t{9} << 20) + 5}) {
      DeviceBytes buf(n);
      const auto before = buf.snapshot();
      Gate gate;
      gate.hold(s);
      std::atomic<int> ran{0};
      staged.enqueue({{buf.get(), n, true, true}}, addTo(buf.get(), n, 5, &ran), s);
      std::this_thread::sleep_for(20ms);
      EXPECT_EQ(ran.load(), 0) << "the body ran before its stream reached it";
      EXPECT_EQ(buf.snapshot(), before);
      gate.open();
      EXPECT_EQ(readInStreamOrder(s, buf), plus(before, 5)) << n << " bytes";
      EXPECT_EQ(ran.load(), 1);
    }
  }
  EXPECT_EQ(errors.count(), 0u);
}

// Out of place, and an in-place all-gather's overlap (send inside recv): the
// staged copies keep their relative positions.
TEST_P(StagedStreamTest, OverlappingRangesKeepTheirPositions) {
  {
    StagedStream staged(0, errors.sink(), GetParam());
    const size_t block = (size_t{1} << 20) + 5, ranks = 3, rank = 1;
    DeviceBytes all(block * ranks);
    uint8_t* send = all.get() + rank * block;
    const auto before = all.snapshot();
    staged.enqueue({{send, block, true, false}, {all.get(), block * ranks, false, true}},
                   [&](const StagedStream::HostOf& hostOf) {
                     auto* r = static_cast<uint8_t*>(hostOf(all.get()));
                     auto* snd = static_cast<uint8_t*>(hostOf(send));
                     ASSERT_EQ(snd, r + rank * block) << "send is no longer inside recv";
                     for (size_t i = 0; i < block * ranks; ++i)
                       if (i / block != rank) r[i] = static_cast<uint8_t>(i % 251);
                   },
                   s);
    auto want = before;
    for (size_t i = 0; i < block * ranks; ++i)
      if (i / block != rank) want[i] = static_cast<uint8_t>(i % 251);
    EXPECT_EQ(readInStreamOrder(s, all), want);

    DeviceBytes in(4099), out(4099);
    staged.enqueue({{in.get(), in.size(), true, false}, {out.get(), out.size(), false, true}},
                   [&](const StagedStream::HostOf& hostOf) {
                     std::memcpy(hostOf(out.get()), hostOf(in.get()), in.size());
                     auto* o = static_cast<uint8_t*>(hostOf(out.get()));
                     o[0] = 42;
                   },
                   s);
    auto wantOut = in.snapshot();
    wantOut[0] = 42;
    EXPECT_EQ(readInStreamOrder(s, out), wantOut);
  }
  EXPECT_EQ(errors.count(), 0u);
}

// Out of place with the output right after the input in one allocation
// (a tensor's two halves): the ranges touch without overlapping, and each
// pointer must lead to its own staged bytes, at sizes that are not whole
// cache lines too.
TEST_P(StagedStreamTest, TouchingRangesEachFindTheirOwnBytes) {
  {
    StagedStream staged(0, errors.sink(), GetParam());
    for (size_t n : {size_t{100}, size_t{4096}, (size_t{3} << 20) + 3}) {
      DeviceBytes both(2 * n);
      uint8_t* in = both.get();
      uint8_t* out = both.get() + n;
      auto want = both.snapshot();
      for (size_t i = 0; i < n; ++i) want[n + i] = static_cast<uint8_t>(want[i] + 1);
      staged.enqueue({{in, n, true, false}, {out, n, false, true}},
                     [&](const StagedStream::HostOf& hostOf) {
                       auto* i = static_cast<const uint8_t*>(hostOf(in));
                       auto* o = static_cast<uint8_t*>(hostOf(out));
                       for (size_t k = 0; k < n; ++k) o[k] = static_cast<uint8_t>(i[k] + 1);
                     },
                     s);
      EXPECT_EQ(readInStreamOrder(s, both), want) << n << " bytes";
    }
  }
  EXPECT_EQ(errors.count(), 0u);
}

// A body that throws: the stream goes on, the error is reported, and the
// next call works. (The failed call's outputs are undefined, as in NCCL:
// the copies back were queued at the call.)
TEST_P(StagedStreamTest, AFailedCallReleasesItsStreamAndTheNextCallWorks) {
  {
    StagedStream staged(0, errors.sink(), GetParam());
    for (size_t n : {size_t{100}, size_t{5 << 20}}) {
      DeviceBytes buf(n);
      staged.enqueue({{buf.get(), n, true, true}},
                     [&](const StagedStream::HostOf& hostOf) {
                       std::memset(hostOf(buf.get()), 0, n);  // half-done work...
                       fail(coilRemoteError, "peer 2 is gone");  // ...then the call fails
                     },
                     s);
      const auto after = readInStreamOrder(s, buf);
      staged.enqueue({{buf.get(), n, true, true}}, addTo(buf.get(), n, 1), s);
      EXPECT_EQ(readInStreamOrder(s, buf), plus(after, 1)) << n << " bytes";
    }
  }
  ASSERT_EQ(errors.count(), 2u);
  EXPECT_NE(errors.messages[0].find("peer 2 is gone"), std::string::npos) << errors.messages[0];
}

// One communicator's calls on two streams take turns with the pinned
// block: neither call's data is overwritten by the other's, small or large
// (a large call passes through the block in several trips).
TEST_P(StagedStreamTest, CallsOnTwoStreamsTakeTurnsWithTheBlock) {
  Stream other = createStream();
  {
    StagedStream staged(0, errors.sink(), GetParam());
    for (size_t n : {size_t{4096}, (size_t{9} << 20) + 7}) {
      DeviceBytes x(n), y(n);
      const auto xBefore = x.snapshot(), yBefore = y.snapshot();
      Gate gate;
      gate.hold(s);
      staged.enqueue({{x.get(), n, true, true}}, addTo(x.get(), n, 1), s);
      staged.enqueue({{y.get(), n, true, true}}, addTo(y.get(), n, 2), other);
      gate.open();
      EXPECT_EQ(readInStreamOrder(s, x), plus(xBefore, 1)) << n << " bytes";
      EXPECT_EQ(readInStreamOrder(other, y), plus(yBefore, 2)) << n << " bytes";
    }
  }
  destroyStream(other);
  EXPECT_EQ(errors.count(), 0u);
}

// Calls run in the order they were made, whichever stream reaches its call
// first; a call on a held stream holds back the later calls of the same
// StagedStream (their tickets come after), not another StagedStream's.
TEST_P(StagedStreamTest, CallsRunInIssueOrderAndOtherCommunicatorsGoOn) {
  Stream held = s, running = createStream();
  {
    StagedStream first(0, errors.sink(), GetParam());
    StagedStream second(0, errors.sink(), GetParam());
    DeviceBytes a(64), b(64), c(64);
    std::mutex m;
    std::vector<char> order;
    auto note = [&](char x) {
      return [&, x](const StagedStream::HostOf&) {
        std::lock_guard<std::mutex> lock(m);
        order.push_back(x);
      };
    };
    Gate gate;
    gate.hold(held);
    first.enqueue({{a.get(), 64, true, true}}, note('a'), held);
    first.enqueue({{b.get(), 64, true, true}}, note('b'), running);
    second.enqueue({{c.get(), 64, true, true}}, note('c'), running);
    std::this_thread::sleep_for(30ms);
    {
      std::lock_guard<std::mutex> lock(m);
      EXPECT_TRUE(order.empty() || (order.size() == 1 && order[0] == 'c'))
          << "b ran before a, whose stream had not reached it";
    }
    gate.open();
    syncStream(held);
    syncStream(running);
    first.drain();
    second.drain();
    std::lock_guard<std::mutex> lock(m);
    ASSERT_EQ(order.size(), 3u);
    EXPECT_LT(std::find(order.begin(), order.end(), 'a'), std::find(order.begin(), order.end(), 'b'));
  }
  destroyStream(running);
  EXPECT_EQ(errors.count(), 0u);
}

TEST_P(StagedStreamTest, DrainWaitsForEveryCallMadeBeforeIt) {
  {
    StagedStream staged(0, errors.sink(), GetParam());
    DeviceBytes buf(1000);
    Gate gate;
    gate.hold(s);
    std::atomic<int> ran{0};
    for (int i = 0; i < 5; ++i) staged.enqueue({{buf.get(), 1000, true, true}}, addTo(buf.get(), 1000, 1, &ran), s);
    staged.enqueue({}, [&](const StagedStream::HostOf&) { ++ran; }, s);  // moves no bytes
    std::atomic<bool> drained{false};
    std::thread waiter([&] {
      staged.drain();
      drained = true;
    });
    std::this_thread::sleep_for(30ms);
    EXPECT_FALSE(drained.load());
    gate.open();
    waiter.join();
    EXPECT_EQ(ran.load(), 6);
  }
  EXPECT_EQ(errors.count(), 0u);
}

// A GPU's streams share its hardware queues (CUDA_DEVICE_MAX_CONNECTIONS of
// them), and a queue runs what it holds in order, whichever stream it came
// from. So a staged call must complete even when every stream shares one
// queue with the stream that waits for the call: the proxy may need nothing
// from the GPU that could sit behind that wait. (On an H100, 2026-11-26,
// thread ranks hung when their proxies' staging copies queued behind their
// streams' waits.)
TEST_P(StagedStreamTest, ACallCompletesWhenEveryStreamSharesOneHardwareQueue) {
  fake::shareHardwareQueues(1);
  Stream shared = createStream();
  {
    StagedStream staged(0, errors.sink(), GetParam());
    for (size_t n : {size_t{0}, size_t{100}, (size_t{5} << 20) + 3}) {
      DeviceBytes buf(n + 1);
      const auto before = buf.snapshot();
      std::vector<DeviceRange> ranges;
      if (n > 0) ranges.push_back({buf.get(), n, true, true});
      staged.enqueue(ranges, n > 0 ? addTo(buf.get(), n, 5) : [](const StagedStream::HostOf&) {}, shared);
      mustFinishWithin(std::chrono::seconds(20), "a staged call on a shared hardware queue",
                       [&] { syncStream(shared); });
      auto want = plus(before, 5);
      want[n] = before[n];
      EXPECT_EQ(buf.snapshot(), want) << n << " bytes";
    }
  }
  fake::shareHardwareQueues(0);
  destroyStream(shared);
  EXPECT_EQ(errors.count(), 0u);
}

// Two ranks as threads of one process on one device, their streams on one
// hardware queue, each call's body a meeting of both (a collective). In
// stream order rank 0's wait for the meeting can sit in the queue before
// rank 1's input copies, which the meeting needs: a deadlock (two H100
// runs, 2026-11-26). In host order no stream waits for the host, so both
// ranks' calls complete, with the right bytes, large calls included.
TEST_P(StagedStreamTest, RanksSharingADeviceInHostOrderNeverWaitForEachOthersQueue) {
  fake::shareHardwareQueues(1);
  constexpr int kRanks = 2;
  Stream streams[kRanks] = {createStream(), createStream()};
  {
    std::vector<std::unique_ptr<StagedStream>> staged;
    for (int r = 0; r < kRanks; ++r)
      staged.push_back(std::make_unique<StagedStream>(0, errors.sink(), GetParam()));
    std::barrier meeting(kRanks);
    const std::vector<size_t> sizes = {size_t{0}, size_t{100}, (size_t{5} << 20) + 3, size_t{4096}};
    std::vector<std::vector<std::unique_ptr<DeviceBytes>>> bufs(kRanks);
    std::vector<std::vector<std::vector<uint8_t>>> before(kRanks);
    for (int r = 0; r < kRanks; ++r)
      for (size_t n : sizes) {
        bufs[r].push_back(std::make_unique<DeviceBytes>(n + 1));
        before[r].push_back(bufs[r].back()->snapshot());
      }
    mustFinishWithin(std::chrono::seconds(30), "two ranks' calls on one shared queue", [&] {
      std::vector<std::thread> ranks;
      for (int r = 0; r < kRanks; ++r)
        ranks.emplace_back([&, r] {
          for (size_t k = 0; k < sizes.size(); ++k) {
            const size_t n = sizes[k];
            uint8_t* p = bufs[r][k]->get();
            std::vector<DeviceRange> ranges;
            if (n > 0) ranges.push_back({p, n, true, true});
            // Rank 1 comes late, after rank 0's call is in the queue.
            if (r == 1) std::this_thread::sleep_for(20ms);
            staged[r]->enqueue(ranges,
                               [&, p, n, r](const StagedStream::HostOf& hostOf) {
                                 meeting.arrive_and_wait();
                                 if (n > 0) addTo(p, n, 3 + r)(hostOf);
                               },
                               streams[r], StagedStream::Order::kHost);
          }
          syncStream(streams[r]);
        });
      for (auto& t : ranks) t.join();
    });
    for (int r = 0; r < kRanks; ++r)
      for (size_t k = 0; k < sizes.size(); ++k) {
        auto want = plus(before[r][k], 3 + r);
        want[sizes[k]] = before[r][k][sizes[k]];
        EXPECT_EQ(bufs[r][k]->snapshot(), want) << "rank " << r << ", " << sizes[k] << " bytes";
      }
  }
  fake::shareHardwareQueues(0);
  for (Stream st : streams) destroyStream(st);
  EXPECT_EQ(errors.count(), 0u);
}

// In host order a body's error comes back from enqueue, and the block is
// free for the next call.
TEST_P(StagedStreamTest, AHostOrderCallThrowsItsBodysErrorAndTheNextCallWorks) {
  {
    StagedStream staged(0, errors.sink(), GetParam());
    DeviceBytes buf(70001);
    const auto before = buf.snapshot();
    const std::vector<DeviceRange> ranges = {{buf.get(), buf.size(), true, true}};
    try {
      staged.enqueue(ranges, [](const StagedStream::HostOf&) { fail(coilRemoteError, "a peer died"); }, s,
                     StagedStream::Order::kHost);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), coilRemoteError);
    }
    staged.enqueue(ranges, addTo(buf.get(), buf.size(), 9), s, StagedStream::Order::kHost);
    EXPECT_EQ(readInStreamOrder(s, buf), plus(before, 9));
  }
  EXPECT_EQ(errors.count(), 0u) << "a host-order call's error went to the asynchronous sink";
}

// Many calls of one communicator on three streams that share two hardware
// queues, sizes from 0 to past the staging bytes, in place and out of
// place: every buffer ends with exactly the sum of what its calls added,
// in its stream's order (each stream has buffers of its own).
TEST_P(StagedStreamTest, ManyCallsOnThreeStreamsSharingTwoQueues) {
  fake::shareHardwareQueues(2);
  std::vector<Stream> streams = {createStream(), createStream(), createStream()};
  {
    StagedStream staged(0, errors.sink(), GetParam());
    const size_t sizes[] = {0, 1, 4099, size_t{1} << 20, (size_t{3} << 20) + 1, (size_t{6} << 20) + 9};
    struct Call {
      size_t n;
      Stream stream;
      int delta;
      std::unique_ptr<DeviceBytes> in, out;  // out: none for an in-place call
      std::vector<uint8_t> wantIn, wantOut;
    };
    // Every buffer is made before the first call (no allocation while a
    // stream waits: the hazard TearDown checks).
    std::vector<Call> calls;
    uint32_t seed = 12345;
    auto next = [&] { return seed = seed * 1103515245u + 12345u; };
    for (int k = 0; k < 36; ++k) {
      Call c;
      c.n = sizes[next() % 6];
      c.stream = streams[static_cast<size_t>(k) % 3];
      c.delta = 1 + static_cast<int>(next() % 7);
      c.in = std::make_unique<DeviceBytes>(c.n + 1);
      c.wantIn = c.in->snapshot();
      if (next() % 2 == 0) {
        for (size_t i = 0; i < c.n; ++i) c.wantIn[i] = static_cast<uint8_t>(c.wantIn[i] + c.delta);
      } else {
        c.out = std::make_unique<DeviceBytes>(c.n + 1);
        c.wantOut = c.out->snapshot();
        for (size_t i = 0; i < c.n; ++i) c.wantOut[i] = static_cast<uint8_t>(c.wantIn[i] + c.delta);
      }
      calls.push_back(std::move(c));
    }
    for (const Call& c : calls) {
      const size_t n = c.n;
      const int delta = c.delta;
      const void* in = c.in->get();
      const void* out = c.out ? c.out->get() : nullptr;
      std::vector<DeviceRange> ranges;
      if (n > 0 && !out) ranges.push_back({in, n, true, true});
      if (n > 0 && out) {
        ranges.push_back({in, n, true, false});
        ranges.push_back({out, n, false, true});
      }
      staged.enqueue(ranges,
                     [=](const StagedStream::HostOf& hostOf) {  // out = in + delta, or in += delta
                       if (n == 0) return;
                       auto* i = static_cast<uint8_t*>(hostOf(in));
                       auto* o = static_cast<uint8_t*>(hostOf(out ? out : in));
                       for (size_t k = 0; k < n; ++k) o[k] = static_cast<uint8_t>(i[k] + delta);
                     },
                     c.stream);
    }
    mustFinishWithin(std::chrono::seconds(60), "36 staged calls on three streams",
                     [&] {
                       for (Stream s : streams) syncStream(s);
                     });
    for (size_t k = 0; k < calls.size(); ++k) {
      EXPECT_EQ(calls[k].in->snapshot(), calls[k].wantIn) << "call " << k << ", " << calls[k].n << " bytes";
      if (calls[k].out) {
        EXPECT_EQ(calls[k].out->snapshot(), calls[k].wantOut) << "call " << k << ", " << calls[k].n << " bytes";
      }
    }
  }
  fake::shareHardwareQueues(0);
  for (Stream s : streams) destroyStream(s);
  EXPECT_EQ(errors.count(), 0u);
}

// 0: every call passes through the 4 MiB pinned block; 1 MiB: small calls
// run in the block, the 3, 5 and 9 MiB ones pass through it (in 1 to 3
// trips); 32 MiB (the default): only the 9 MiB calls pass through it.
INSTANTIATE_TEST_SUITE_P(Staging, StagedStreamTest,
                         ::testing::Values(size_t{0}, size_t{1} << 20,
                                           StagedStream::kDefaultStagingBytes),
                         [](const auto& info) { return std::to_string(info.param >> 10) + "KiB"; });

}  // namespace
}  // namespace coil::device
