// The device window collectives (algorithms/device_window_collectives.h),
// run by StagedStream on the fake GPU (fake_device.cc): ranks as threads
// and as forked processes, each with a window from allocShared whose
// descriptor reaches the others over FdMailbox, as api/peer_windows.cc does
// on a GPU. Results are checked bit for bit against the independent
// reference (tests/harness/collective_reference.h): the all-reduce at
// awkward sizes, over several pieces, in place, in stream and host order;
// every other collective from every kind of root, in place and out; and a
// rank that never arrives fails its peers' calls without holding up their
// streams.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/deadline.h"
#include "core/error.h"
#include "algorithms/device_window_collectives.h"
#include "device/staged_stream.h"
#include "harness/collective_reference.h"
#include "harness/reference.h"
#include "net/fd_passing.h"
#include "tests/device/fake_device.h"

namespace coil::device {

using algo::DeviceWindow;
using algo::deviceWindowPhases;
namespace {

using Order = StagedStream::Order;

// A barrier in memory shared by every rank, threads or processes.
struct SharedBarrier {
  std::atomic<uint32_t> arrived{0};
  std::atomic<uint32_t> generation{0};
  int nranks = 0;

  void wait(int timeoutMs) {
    const uint32_t gen = generation.load();
    if (arrived.fetch_add(1) + 1 == static_cast<uint32_t>(nranks)) {
      arrived.store(0);
      generation.fetch_add(1);
      return;
    }
    const Deadline deadline = Deadline::after(timeoutMs);
    while (generation.load() == gen) {
      if (deadline.expired()) fail(coilTimeout, "test barrier: a rank did not arrive");
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
};

SharedBarrier* makeSharedBarrier(int nranks) {
  void* p = mmap(nullptr, sizeof(SharedBarrier), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap");
  auto* b = new (p) SharedBarrier();
  b->nranks = nranks;
  return b;
}

using algo::CollKind;
using test::CollectiveCase;

// Windows of two 4 KiB slots: any call past 4 KiB (less for 3 or 5 ranks,
// whose slices are whole 256-byte lines, and for the programs that put n
// pieces in a slot) runs in several pieces.
constexpr size_t kSlotBytes = 4096;

const std::vector<CollectiveCase>& allReduceCases() {
  using K = CollKind;
  static const std::vector<CollectiveCase> all = {
      {K::AllReduce, coilInt32, coilSum, 1, 0, false},
      {K::AllReduce, coilInt32, coilSum, 7, 0, false},
      {K::AllReduce, coilInt32, coilSum, 131, 0, false},
      {K::AllReduce, coilInt32, coilSum, 2, 0, false},
      {K::AllReduce, coilInt32, coilSum, 3001, 0, false},
      {K::AllReduce, coilInt32, coilSum, 3001, 0, true},
      {K::AllReduce, coilFloat32, coilMax, 257, 0, false},
      {K::AllReduce, coilFloat32, coilAvg, 1000, 0, false},
      {K::AllReduce, coilInt64, coilProd, 53, 0, false},
      {K::AllReduce, coilBfloat16, coilSum, 2999, 0, false},
      {K::AllReduce, coilUint8, coilMin, 4099, 0, false},
      {K::AllReduce, coilFloat64, coilAvg, 2049, 0, true},
      {K::AllReduce, coilFloat16, coilSum, 5, 0, true},
      {K::AllReduce, coilInt64, coilBxor, 1031, 0, false},
      {K::AllReduce, coilUint8, coilBand, 977, 0, true},
  };
  return all;
}

// Every other collective: a prime count of one piece or less, one of
// several pieces (a 4 KiB slot holds 1024 int32, 512 float64 and fewer
// where n pieces share it), count 1, in place and out, every op on the
// reductions, and roots 0 and nranks - 1.
std::vector<CollectiveCase> otherCollectiveCases(int nranks) {
  using K = CollKind;
  std::vector<CollectiveCase> out;
  const int last = nranks - 1;
  for (K k : {K::AllGather, K::ReduceScatter, K::AllToAll, K::Broadcast, K::Reduce, K::Gather,
              K::Scatter}) {
    const bool rooted = k == K::Broadcast || k == K::Reduce || k == K::Gather || k == K::Scatter;
    for (int root : rooted ? std::vector<int>{0, last} : std::vector<int>{0}) {
      for (bool inPlace : {false, true}) {
        if (k == K::AllToAll && inPlace) continue;  // not defined in place
        out.push_back({k, coilInt32, coilSum, 1, root, inPlace});
        out.push_back({k, coilFloat64, coilMax, 131, root, inPlace});
        out.push_back({k, coilInt32, coilProd, 2503, root, inPlace});
      }
      out.push_back({k, coilBfloat16, coilAvg, 1999, root, false});
      out.push_back({k, coilUint8, coilMin, 4099, root, false});
    }
  }
  return out;
}

std::string mailboxPrefix() {
  static std::atomic<int> runs{0};
  return "peer-test-" + std::to_string(::getpid()) + "-" + std::to_string(runs++) + "-";
}

// The windows of every rank as this one maps them: its own from
// allocShared, the others' through their descriptors.
std::vector<SharedMemory> exchangeWindows(const std::string& prefix, int rank, int nranks,
                                          SharedBarrier* barrier) {
  std::vector<SharedMemory> maps(static_cast<size_t>(nranks));
  maps[rank] = allocShared(2 * kSlotBytes);
  FdMailbox box(prefix + std::to_string(rank));
  OwnedFd mine = exportShared(maps[rank]);
  barrier->wait(20000);  // every mailbox is open
  std::thread sender([&] {
    const int fd = mine.get();
    for (int peer = 0; peer < nranks; ++peer)
      if (peer != rank)
        FdMailbox::send(prefix + std::to_string(peer), static_cast<uint64_t>(rank),
                        std::span<const int>(&fd, 1), Deadline::after(20000));
  });
  for (int peer = 0; peer < nranks; ++peer) {
    if (peer == rank) continue;
    std::vector<OwnedFd> fds = box.receive(static_cast<uint64_t>(peer), Deadline::after(20000));
    maps[peer] = importShared(fds.at(0).get(), maps[rank].bytes);
  }
  sender.join();
  return maps;
}

// One rank's run of every case; "" or what went wrong.
std::string runRank(int rank, int nranks, Order order, SharedBarrier* barrier,
                    const std::string& prefix, const std::vector<CollectiveCase>& todo,
                    int barrierMs, int absentRank = -1) {
  std::vector<SharedMemory> maps = exchangeWindows(prefix, rank, nranks, barrier);
  std::vector<DeviceWindow> windows;
  for (const SharedMemory& m : maps)
    windows.push_back({{static_cast<uint8_t*>(m.ptr), static_cast<uint8_t*>(m.ptr) + kSlotBytes}});
  std::string problems;
  std::mutex problemsMutex;
  auto note = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(problemsMutex);
    problems += what + "\n";
  };
  size_t most = 0;
  for (const CollectiveCase& c : todo)
    most = std::max({most, test::inputElems(c, nranks) * test::sizeOf(c.type),
                     test::outputElems(c, nranks) * test::sizeOf(c.type)});
  // Everything the calls use is allocated first: nothing while a stream waits.
  auto* send = static_cast<uint8_t*>(allocDevice(most));
  auto* recv = static_cast<uint8_t*>(allocDevice(most));
  {
    StagedStream staged(0, [&](const Error& e) { note(std::string("async: ") + e.what()); });
    Stream stream = createStream();
    for (const CollectiveCase& c : todo) {
      const test::PlacedCall placed = test::placeCall(c, rank, nranks, send, recv);
      auto phases = deviceWindowPhases(
          c.kind, {placed.send, placed.recv, c.count, c.type, c.op, c.root}, windows, kSlotBytes,
          rank, [&] { barrier->wait(barrierMs); }, [&] { barrier->wait(barrierMs); });
      try {
        staged.enqueuePhases(std::move(phases), stream, order);
      } catch (const Error& e) {
        note(std::string("call: ") + e.what());
      }
      syncStream(stream);  // in stream order: the stream passed the last host step
      staged.drain();
      if (absentRank >= 0) continue;  // the failure test checks the errors only
      const std::vector<uint8_t> want = test::collectiveExpected(c, rank, nranks);
      if (want.empty()) continue;  // unspecified here
      const size_t bad =
          test::firstMismatch(c.type, placed.recv, want.data(), test::outputElems(c, nranks));
      if (bad != SIZE_MAX)
        note(test::describe(c) + ": element " + std::to_string(bad) + " differs on rank " +
             std::to_string(rank));
    }
    destroyStream(stream);
  }
  freeDevice(send);
  freeDevice(recv);
  for (SharedMemory& m : maps) freeShared(m);
  return problems;
}

struct RankSetup {
  bool processes;
  int nranks;
  Order order;
};

std::string nameOf(const testing::TestParamInfo<RankSetup>& info) {
  return std::string(info.param.processes ? "procs" : "threads") + "_" +
         std::to_string(info.param.nranks) + "_" +
         (info.param.order == Order::kStream ? "stream" : "host");
}

// Runs `body(rank)` on every rank as the setup says; returns each rank's report.
std::vector<std::string> onEveryRank(const RankSetup& s,
                                     const std::function<std::string(int)>& body) {
  std::vector<std::string> reports(static_cast<size_t>(s.nranks));
  if (!s.processes) {
    std::vector<std::thread> threads;
    for (int r = 0; r < s.nranks; ++r)
      threads.emplace_back([&, r] {
        try {
          reports[r] = body(r);
        } catch (const std::exception& e) {
          reports[r] = std::string("threw: ") + e.what();
        }
      });
    for (std::thread& t : threads) t.join();
    return reports;
  }
  std::vector<pid_t> children;
  for (int r = 0; r < s.nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      std::string report;
      try {
        report = body(r);
      } catch (const std::exception& e) {
        report = std::string("threw: ") + e.what();
      }
      if (!report.empty()) std::fprintf(stderr, "rank %d: %s", r, report.c_str());
      std::fflush(stderr);
      _exit(report.empty() ? 0 : 1);
    }
    children.push_back(pid);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < s.nranks; ++r) {
    int status = 0;
    for (;;) {
      if (waitpid(children[r], &status, WNOHANG) == children[r]) break;
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
        for (pid_t p : children) kill(p, SIGKILL);
        waitpid(children[r], &status, 0);
        reports[r] = "did not finish within 60 s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (reports[r].empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
      reports[r] = "failed (its stderr says how)";
  }
  return reports;
}

class PeerAllReduce : public testing::TestWithParam<RankSetup> {};

TEST_P(PeerAllReduce, EveryCaseMatchesTheReference) {
  const RankSetup s = GetParam();
  SharedBarrier* barrier = makeSharedBarrier(s.nranks);
  const std::string prefix = mailboxPrefix();
  const auto reports = onEveryRank(s, [&](int rank) {
    return runRank(rank, s.nranks, s.order, barrier, prefix, allReduceCases(), 20000);
  });
  for (int r = 0; r < s.nranks; ++r) EXPECT_EQ(reports[r], "") << "rank " << r;
  munmap(barrier, sizeof(SharedBarrier));
}

// Every other collective, on the same windows.
class PeerCollectives : public testing::TestWithParam<RankSetup> {};

TEST_P(PeerCollectives, EveryCaseMatchesTheReference) {
  const RankSetup s = GetParam();
  SharedBarrier* barrier = makeSharedBarrier(s.nranks);
  const std::string prefix = mailboxPrefix();
  const auto reports = onEveryRank(s, [&](int rank) {
    return runRank(rank, s.nranks, s.order, barrier, prefix, otherCollectiveCases(s.nranks),
                   20000);
  });
  for (int r = 0; r < s.nranks; ++r) EXPECT_EQ(reports[r], "") << "rank " << r;
  munmap(barrier, sizeof(SharedBarrier));
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, PeerCollectives,
    testing::Values(RankSetup{false, 1, Order::kStream}, RankSetup{false, 2, Order::kHost},
                    RankSetup{false, 3, Order::kStream}, RankSetup{true, 2, Order::kStream},
                    RankSetup{true, 5, Order::kStream}, RankSetup{true, 3, Order::kHost}),
    nameOf);

INSTANTIATE_TEST_SUITE_P(
    Ranks, PeerAllReduce,
    testing::Values(RankSetup{false, 1, Order::kStream}, RankSetup{false, 2, Order::kStream},
                    RankSetup{false, 3, Order::kHost}, RankSetup{false, 5, Order::kStream},
                    RankSetup{true, 2, Order::kStream}, RankSetup{true, 3, Order::kStream},
                    RankSetup{true, 2, Order::kHost}, RankSetup{true, 5, Order::kStream}),
    nameOf);

// A rank that stops taking part: its peers' calls fail (the barrier's
// timeout reaches onError) and their streams still go on.
TEST(PeerAllReduceFaults, ARankThatNeverArrivesFailsItsPeersWithoutHoldingTheirStreams) {
  const int nranks = 3;
  SharedBarrier* barrier = makeSharedBarrier(nranks);
  const std::string prefix = mailboxPrefix();
  const std::vector<CollectiveCase> one = {
      {CollKind::AllReduce, coilInt32, coilSum, 3001, 0, false}};
  std::vector<std::string> reports(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      if (r == 2) {  // maps the windows, then leaves
        std::vector<SharedMemory> maps = exchangeWindows(prefix, r, nranks, barrier);
        for (SharedMemory& m : maps) freeShared(m);
        return;
      }
      reports[r] = runRank(r, nranks, Order::kStream, barrier, prefix, one, 300, 2);
    });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(reports[r].find("async: test barrier: a rank did not arrive"), std::string::npos)
        << "rank " << r << ": " << reports[r];
  }
  munmap(barrier, sizeof(SharedBarrier));
}

}  // namespace
}  // namespace coil::device
