// A rank that returns from main (or calls exit) right after a send, without
// coilCommDestroy: what it sent must still arrive, as it does with Gloo and
// with a plain socket. coilSend returns once coil holds the data; over tcp a
// proxy thread writes it to the socket a moment later, and before the fix
// the process was gone by then in 25-100% of runs (the receiver failed with
// "rank 0 closed its connection or died"). Now coil waits at exit, bounded,
// until every live communicator's queued sends have left the process.
//
// Each round forks a fresh launcher (a process where coil has done nothing
// yet, see fork_after_unique_id_test.cc) that gets an id and forks two ranks.
// The same body runs over every tested transport.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "coil.h"
#include "harness/asan_allocator.h"
#include "harness/wait_or_kill.h"
#include "harness/run_ranks.h"

namespace coil::test {
namespace {

using Clock = std::chrono::steady_clock;

enum class What { Send, Broadcast, SendThenForkedChildExits };

float valueAt(size_t i) { return static_cast<float>(i % 1000003); }

// Rank 0 sends (or broadcasts) `count` floats and calls exit(0) without
// destroying its communicator; rank 1 receives, checks, destroys.
[[noreturn]] void runRank(const coilUniqueId& id, int rank, size_t count, What what) {
  coilComm_t comm = nullptr;
  if (coilCommInitRank(&comm, 2, id, rank) != coilSuccess) _exit(3);
  std::vector<float> buf(count);
  if (rank == 0) {
    for (size_t i = 0; i < count; ++i) buf[i] = valueAt(i);
    const coilResult_t rc = what == What::Broadcast
                                ? coilBroadcast(buf.data(), buf.data(), count, coilFloat, 0, comm, nullptr)
                                : coilSend(buf.data(), count, coilFloat, 1, comm, nullptr);
    if (rc != coilSuccess) _exit(4);
    if (what == What::SendThenForkedChildExits) {
      // A child forked after init inherits the communicator but none of its
      // threads: its exit must not wait for sends it can never make.
      const pid_t child = fork();
      if (child == 0) exit(0);
      const int status = waitOrKill(child, Clock::now() + std::chrono::seconds(1));
      if (status != 0) _exit(5);
    }
    exit(0);  // atexit handlers and static destructors run; no coilCommDestroy
  }
  const coilResult_t rc = what == What::Broadcast
                              ? coilBroadcast(buf.data(), buf.data(), count, coilFloat, 0, comm, nullptr)
                              : coilRecv(buf.data(), count, coilFloat, 0, comm, nullptr);
  if (rc != coilSuccess) {
    std::fprintf(stderr, "rank 1: %s\n", coilGetLastError(comm));
    _exit(6);
  }
  for (size_t i = 0; i < count; ++i)
    if (buf[i] != valueAt(i)) _exit(7);
  coilCommDestroy(comm);
  _exit(0);
}

// A launcher: an id, two ranks, their statuses folded into one: 0 when both
// succeeded, else 10 × rank + its status (or 99 when one had to be killed).
[[noreturn]] void runLauncher(size_t count, What what) {
  coilUniqueId id;
  if (coilGetUniqueId(&id) != coilSuccess) _exit(2);
  pid_t ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = fork();
    if (ranks[r] == 0) runRank(id, r, count, what);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  int result = 0;
  for (int r = 0; r < 2; ++r) {
    const int status = waitOrKill(ranks[r], deadline);
    if (status != 0 && result == 0) result = status < 0 ? 99 : 10 * r + status;
  }
  _exit(result);
}

struct Case {
  std::string transport;
  What what;
};

class ExitWithoutDestroy : public ::testing::TestWithParam<Case> {};

TEST_P(ExitWithoutDestroy, WhatWasSentArrives) {
  if (kAsanAllocator)
    GTEST_SKIP() << "this build's AddressSanitizer allocator is not fork-safe with a thread "
                    "allocating (harness/asan_allocator.h), and its leak check would report the "
                    "communicator this test leaves on purpose; the release build runs this test";
  setenv("COIL_TRANSPORT", GetParam().transport.c_str(), 1);
  // Sizes from one FIFO slot to several (tcp's slots are 128 KiB); rounds,
  // because the loss was a race.
  for (size_t count : {size_t{2}, size_t{40000}, size_t{1} << 20})
    for (int round = 0; round < 4; ++round) {
      SCOPED_TRACE(::testing::Message() << count << " floats, round " << round);
      const pid_t launcher = fork();
      if (launcher == 0) runLauncher(count, GetParam().what);
      const int status = waitOrKill(launcher, Clock::now() + std::chrono::seconds(40));
      ASSERT_EQ(status, 0) << "10 x rank + its exit code (rank 1: 6 = the receive failed, "
                              "7 = wrong data; rank 0: 5 = a forked child's exit hung)";
    }
  unsetenv("COIL_TRANSPORT");
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string& t : testedTransports())
    for (What w : {What::Send, What::Broadcast, What::SendThenForkedChildExits})
      out.push_back({t, w});
  return out;
}

std::string caseName(const ::testing::TestParamInfo<Case>& i) {
  const char* what[] = {"send", "broadcast", "send_then_forked_child"};
  return i.param.transport + "_" + what[static_cast<int>(i.param.what)];
}

INSTANTIATE_TEST_SUITE_P(Transports, ExitWithoutDestroy, ::testing::ValuesIn(cases()), caseName);

}  // namespace
}  // namespace coil::test
