// Teardown of device memory shared through CUDA's legacy IPC, on the fake
// GPU (fake_device.cc). CUDA's rule (cudaIpcOpenMemHandle's docs): memory
// that another process opened must not be freed before that process closed
// it; the result is undefined. The fake counts every free that breaks it
// (fake::freesWhileOpenedElsewhere). These tests free memory that other
// processes have opened, at the moments real programs free it:
//   - coil's own peer window (COIL_PEER_IPC=legacy), when a rank destroys
//     its communicator before its peers do;
//   - the application's buffer behind a window (coilCommWindowRegister),
//     right after coilCommWindowDeregister returns, or after the
//     communicator is destroyed without deregistering it.
// Init, when one rank cannot open what the others opened, frees the same
// way. A peer that died, a communicator whose ranks are all threads of one
// process (nothing opened, and one thread may destroy every rank in turn),
// and one whose processes each hold several ranks (one thread may destroy
// them in turn) must not make destroy wait; the last keeps its windows
// until exit instead.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include "api/handle.h"
#include "device/device.h"
#include "harness/reference.h"
#include "harness/run_ranks.h"
#include "tests/device/fake_device.h"

namespace coil::test {
namespace {

using device::fake::DeviceBuffer;
using std::chrono::milliseconds;

constexpr int kRanks = 3;
constexpr milliseconds kLate{400};  // how much later the other ranks close

// One all-reduce on device buffers and a stream, checked: through the peer
// windows (or a registered window holding `send`), so that every rank has
// opened its peers' memory and read it.
void allReduceChecked(coilComm_t comm, int rank, int nranks, uint8_t* send, uint8_t* recv) {
  constexpr size_t kCount = 1031;
  const auto in = makeInput(coilInt32, coilSum, rank, nranks, kCount);
  const auto want = makeExpected(coilInt32, coilSum, nranks, kCount);
  std::memcpy(send, in.data(), kCount * 4);
  device::Stream stream = device::createStream();
  ASSERT_EQ(coilAllReduce(send, recv, kCount, coilInt32, coilSum, comm, stream), coilSuccess)
      << coilGetLastError(comm);
  device::syncStream(stream);
  device::destroyStream(stream);
  coilResult_t async = coilSuccess;
  ASSERT_EQ(coilCommGetAsyncError(comm, &async), coilSuccess);
  ASSERT_EQ(async, coilSuccess) << coilGetLastError(comm);
  ASSERT_EQ(firstMismatch(coilInt32, recv, want.data(), kCount), SIZE_MAX);
}

class LegacyPeerWindows : public ::testing::Test {
 protected:
  ScopedEnv minBytes_{"COIL_PEER_MIN_BYTES", "1"};
  ScopedEnv windowBytes_{"COIL_PEER_WINDOW_BYTES", "4096"};
  ScopedEnv sharing_{"COIL_PEER_IPC", "legacy"};
};

// Rank 0 destroys its communicator while the others still hold its window
// open; they destroy theirs a moment later.
TEST_F(LegacyPeerWindows, ARankThatDestroysFirstFreesItsWindowOnlyOnceThePeersClosedIt) {
  runRanksRaw({kRanks, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, kRanks, rank, 30000);
    ASSERT_NE(comm, nullptr);
    ASSERT_NE(comm->peerWindows, nullptr);
    ASSERT_STREQ(comm->peerWindows->sharing, "legacy CUDA IPC handles");
    {
      DeviceBuffer send(1031 * 4), recv(1031 * 4);
      allReduceChecked(comm, rank, kRanks, send.get(), recv.get());
    }
    if (rank != 0) std::this_thread::sleep_for(kLate);
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess) << coilGetLastError(nullptr);
    EXPECT_EQ(device::fake::freesWhileOpenedElsewhere(), 0) << "rank " << rank;
  });
}

// The peers destroy at the same time, but one is slow to close the
// windows it opened.
TEST_F(LegacyPeerWindows, APeerSlowToCloseHoldsTheOthersWindowsUp) {
  runRanksRaw({kRanks, Launch::Processes, "tcp"}, [&](const coilUniqueId& id, int rank) {
    if (rank == 2) device::fake::delayCloses(kLate);
    coilComm_t comm = initWithTimeout(id, kRanks, rank, 30000);
    ASSERT_NE(comm, nullptr);
    ASSERT_NE(comm->peerWindows, nullptr);
    {
      DeviceBuffer send(1031 * 4), recv(1031 * 4);
      allReduceChecked(comm, rank, kRanks, send.get(), recv.get());
    }
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess) << coilGetLastError(nullptr);
    EXPECT_EQ(device::fake::freesWhileOpenedElsewhere(), 0) << "rank " << rank;
  });
}

// A peer that died closed everything with its process: destroy neither
// waits for it for long nor fails.
TEST_F(LegacyPeerWindows, ADeadPeerDoesNotHoldDestroyUp) {
  // Ranks 0 and 1 count themselves out of the all-reduce here (memory the
  // forked ranks share, outside coil) before rank 2 dies: dying while a
  // peer is still in the call's last barrier fails that call instead.
  void* shared = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* checked = new (shared) std::atomic<int>(0);
  runRanksRaw({kRanks, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    coilComm_t comm = initWithTimeout(id, kRanks, rank, 30000);
    ASSERT_NE(comm, nullptr);
    ASSERT_NE(comm->peerWindows, nullptr);
    {
      DeviceBuffer send(1031 * 4), recv(1031 * 4);
      allReduceChecked(comm, rank, kRanks, send.get(), recv.get());
    }
    if (rank == 2) {
      const auto since = Clock::now();
      while (checked->load() < kRanks - 1 && secondsSince(since) < 20.0) usleep(100);
      _exit(0);  // gone, without a word to the others
    }
    checked->fetch_add(1);
    const auto start = Clock::now();
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess) << coilGetLastError(nullptr);
    EXPECT_LT(secondsSince(start), 10.0);
    EXPECT_EQ(device::fake::freesWhileOpenedElsewhere(), 0) << "rank " << rank;
  });
  munmap(shared, sizeof(std::atomic<int>));
}

// Init, when one rank cannot open its peers' windows: the others opened
// theirs, and every rank frees its own as the ranks give the windows up.
TEST_F(LegacyPeerWindows, WindowsGivenUpAtInitAreFreedOnlyOnceThePeersClosedThem) {
  runRanksRaw({kRanks, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    if (rank == 2) device::fake::failIpcOpens("cudaErrorMapBufferObjectFailed");
    if (rank == 1) device::fake::delayCloses(kLate);
    coilComm_t comm = initWithTimeout(id, kRanks, rank, 30000);
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(comm->peerWindows, nullptr);  // staged, on every rank
    EXPECT_EQ(device::fake::freesWhileOpenedElsewhere(), 0) << "rank " << rank;
    {
      DeviceBuffer send(1031 * 4), recv(1031 * 4);
      allReduceChecked(comm, rank, kRanks, send.get(), recv.get());
    }
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

// Ranks that are threads of one process open nothing (they use each
// other's addresses): destroy does not wait for the others, so one rank
// can go while the rest still run, and one thread can destroy every rank
// of coilCommInitAll in turn.
TEST_F(LegacyPeerWindows, ThreadsOfOneProcessDestroyWithoutWaitingForEachOther) {
  std::vector<coilComm_t> comms(kRanks);
  ASSERT_EQ(coilCommInitAll(comms.data(), kRanks, nullptr), coilSuccess)
      << coilGetLastError(nullptr);
  ASSERT_NE(comms[0]->peerWindows, nullptr);
  ASSERT_STREQ(comms[0]->peerWindows->sharing, "legacy CUDA IPC handles");
  const auto start = Clock::now();
  for (coilComm_t c : comms) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
  EXPECT_LT(secondsSince(start), 10.0);
}

// A window over the whole of `memory` (kWindowBytes), mapped by every rank;
// null after a failed assertion.
constexpr size_t kWindowBytes = 16384;  // an all-reduce's input and output

coilWindow_t registerWindow(coilComm_t comm, uint8_t* memory) {
  coilWindow_t win = nullptr;
  EXPECT_EQ(coilCommWindowRegister(comm, memory, kWindowBytes, &win, COIL_WIN_DEFAULT), coilSuccess)
      << coilGetLastError(comm);
  if (win != nullptr) {
    EXPECT_TRUE(win->mapped());
  }
  return win;
}

// NCCL's pattern for several GPUs per process: one thread makes its
// process's ranks in a group and destroys them one after another. Here two
// processes of two ranks each: a destroy that waited for every rank would
// wait for the process's next rank, which its thread reaches only after.
// So destroy does not wait, and leaves the window allocated until exit.
TEST_F(LegacyPeerWindows, OneThreadDestroysTheRanksOfItsProcessInTurn) {
  constexpr int kPerProcess = 2, kProcesses = 2, kAll = kPerProcess * kProcesses;
  ScopedEnv timeout("COIL_TIMEOUT_MS", "20000");
  runRanksRaw({kProcesses, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int process) {
    std::vector<coilComm_t> comms(kPerProcess, nullptr);
    ASSERT_EQ(coilGroupStart(), coilSuccess);
    for (int i = 0; i < kPerProcess; ++i)
      ASSERT_EQ(coilCommInitRank(&comms[i], kAll, id, process * kPerProcess + i), coilSuccess);
    ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(nullptr);
    for (coilComm_t c : comms) {
      ASSERT_NE(c->peerWindows, nullptr);
      ASSERT_STREQ(c->peerWindows->sharing, "legacy CUDA IPC handles");
    }
    const auto start = Clock::now();
    for (coilComm_t c : comms) EXPECT_EQ(coilCommDestroy(c), coilSuccess);
    EXPECT_LT(secondsSince(start), 10.0);
    EXPECT_EQ(device::fake::freesWhileOpenedElsewhere(), 0) << "process " << process;
  });
}

class RegisteredWindows : public ::testing::Test {
 protected:
  ScopedEnv minBytes_{"COIL_PEER_MIN_BYTES", "1"};
};

// The application frees its buffer as soon as coilCommWindowDeregister
// returns, as it may; rank 2 is slow to close what it opened.
TEST_F(RegisteredWindows, ABufferMayBeFreedAsSoonAsDeregisterReturns) {
  runRanksRaw({kRanks, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    if (rank == 2) device::fake::delayCloses(kLate);
    coilComm_t comm = initWithTimeout(id, kRanks, rank, 30000);
    ASSERT_NE(comm, nullptr);
    {
      DeviceBuffer memory(kWindowBytes);
      const coilWindow_t win = registerWindow(comm, memory.get());
      ASSERT_NE(win, nullptr);
      const uint64_t before = comm->windows->callsRun.load();
      allReduceChecked(comm, rank, kRanks, memory.get(), memory.get() + kWindowBytes / 2);
      EXPECT_EQ(comm->windows->callsRun.load() - before, 1u);
      EXPECT_EQ(coilCommWindowDeregister(comm, win), coilSuccess) << coilGetLastError(comm);
    }  // freed here
    EXPECT_EQ(device::fake::freesWhileOpenedElsewhere(), 0) << "rank " << rank;
    EXPECT_EQ(coilCommDestroy(comm), coilSuccess);
  });
}

// A communicator destroyed with its windows still registered: the buffers
// may be freed once destroy returns, though the peers destroy later.
TEST_F(RegisteredWindows, ABufferMayBeFreedOnceTheCommunicatorIsDestroyed) {
  runRanksRaw({kRanks, Launch::Processes, "shm"}, [&](const coilUniqueId& id, int rank) {
    {
      DeviceBuffer memory(kWindowBytes);
      coilComm_t comm = initWithTimeout(id, kRanks, rank, 30000);
      ASSERT_NE(comm, nullptr);
      ASSERT_NE(registerWindow(comm, memory.get()), nullptr);
      const uint64_t before = comm->windows->callsRun.load();
      allReduceChecked(comm, rank, kRanks, memory.get(), memory.get() + kWindowBytes / 2);
      EXPECT_EQ(comm->windows->callsRun.load() - before, 1u);
      if (rank != 0) std::this_thread::sleep_for(kLate);
      EXPECT_EQ(coilCommDestroy(comm), coilSuccess) << coilGetLastError(nullptr);
    }  // freed here
    EXPECT_EQ(device::fake::freesWhileOpenedElsewhere(), 0) << "rank " << rank;
  });
}

}  // namespace
}  // namespace coil::test
