// coil-sim's replay (tools/sim/simulation.h): steps, messages, verdicts and
// costs, against what the algorithms and the tuner say independently.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "model.h"
#include "simulation.h"

namespace coil::sim {
namespace {

using algo::CollKind;

Request request(CollKind kind, const char* algorithm, int n, size_t count, size_t chunk = 0) {
  Request r;
  r.collective = kind;
  r.algorithm = algo::findProgram(kind, algorithm);
  r.nranks = n;
  r.count = count;
  r.chunkElems = chunk;
  return r;
}

// Every rank on a host of its own.
Request acrossHosts(Request r) {
  for (int q = 0; q < r.nranks; ++q) r.hostOf.push_back(q);
  return r;
}

// Every registered program, FIFO and window alike (the window programs'
// schedule replay is this one: it knows shared slots and the step
// handshake), for n = 1-8 and 11, at awkward counts and chunks.
TEST(Simulation, EveryRegisteredProgramEndsAsItsCollectiveDefines) {
  for (const auto& a : algo::algorithmPrograms())
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 11})
      for (size_t count : {1, 2, 7, 20, 64})
        for (size_t chunk : {0, 1, 5}) {
          Request r = request(a.collective, a.name, n, count, chunk);
          r.root = n / 2;
          const Simulation s = simulate(r);
          const std::string what = std::string(a.function) + " n=" + std::to_string(n) +
                                   " count=" + std::to_string(count) +
                                   " chunk=" + std::to_string(chunk);
          EXPECT_FALSE(s.deadlocked) << what;
          EXPECT_TRUE(s.wrong.empty()) << what << ": " << s.wrong.front();
          for (const Message& m : s.messages)
            EXPECT_GT(m.receivedRound, m.sentRound - (m.exchange ? 1 : 0)) << what;
        }
}

// A window program's form over FIFOs, as the ranks run it across hosts.
TEST(Simulation, EveryFifoFormEndsAsItsCollectiveDefines) {
  size_t forms = 0;
  for (const auto& a : algo::algorithmPrograms()) {
    if (!a.hasFifoForm()) continue;
    ++forms;
    for (int n : {2, 3, 4, 5, 6, 7, 8, 11})
      for (size_t count : {1, 2, 7, 20, 64}) {
        const Simulation s = simulate(acrossHosts(request(a.collective, a.name, n, count)));
        const std::string what = std::string(a.withoutWindow.function) + " n=" +
                                 std::to_string(n) + " count=" + std::to_string(count);
        EXPECT_EQ(s.form, Form::kFifo) << what;
        EXPECT_FALSE(s.deadlocked) << what;
        EXPECT_TRUE(s.wrong.empty()) << what << ": " << s.wrong.front();
        for (const Message& m : s.messages) EXPECT_GT(m.receivedRound, m.sentRound) << what;
      }
  }
  EXPECT_EQ(forms, 1u);  // the one-shot's
}

// "oneshot" is the window program on one host and the FIFO program across
// hosts, as in the library; slice has no form without a window.
TEST(Simulation, OneShotAcrossHostsRunsOverFifos) {
  const Simulation one = simulate(request(CollKind::AllReduce, "oneshot", 3, 4));
  EXPECT_EQ(one.form, Form::kWindow);
  EXPECT_STREQ(one.function(), "windowOneShotProgram");
  Request sameHost = request(CollKind::AllReduce, "oneshot", 3, 4);
  sameHost.hostOf = {0, 0, 0};
  EXPECT_EQ(simulate(sameHost).form, Form::kWindow);

  const Simulation fifo = simulate(acrossHosts(request(CollKind::AllReduce, "oneshot", 3, 4)));
  EXPECT_EQ(fifo.form, Form::kFifo);
  EXPECT_STREQ(fifo.function(), "fifoOneShotProgram");
  EXPECT_EQ(fifo.rounds, 2 * (3 - 1) + 2);  // a receive and a send per peer, wait, reduce
  EXPECT_EQ(fifo.messages.size(), 3u * 2u);
  for (const Message& m : fifo.messages) {
    EXPECT_EQ(m.count, 4u);                   // the whole input, once per peer
    EXPECT_EQ(m.receivedRound, fifo.rounds - 2);  // all taken by the one wait
  }
  Request twoHosts = request(CollKind::AllReduce, "oneshot", 4, 4);
  twoHosts.hostOf = {0, 0, 1, 1};
  EXPECT_EQ(simulate(twoHosts).form, Form::kFifo);

  EXPECT_THROW(simulate(acrossHosts(request(CollKind::AllReduce, "slice", 3, 4))),
               std::invalid_argument);
}

// The window programs' reads: every peer's slot is read only after the
// step that filled it was posted, and the one-shot reads every peer once.
// The rooted one-shot: one round of whole exchanges (n-1 messages per rank,
// each the same size whoever's data it carries), the records and the data
// summed, then each rank takes its result; the same on one host or several.
TEST(Simulation, RootedOneShotSendsWholeExchangesInOneRound) {
  for (CollKind k : {CollKind::Broadcast, CollKind::Reduce, CollKind::Gather, CollKind::Scatter})
    for (bool hosts : {false, true}) {
      Request r = request(k, "oneshot", 4, 3);
      r.root = 2;
      const Simulation s = simulate(hosts ? acrossHosts(r) : r);
      const std::string what = std::string(algo::collName(k)) + (hosts ? " across hosts" : "");
      EXPECT_EQ(s.form, Form::kExchange) << what;
      EXPECT_TRUE(s.wrong.empty()) << what;
      ASSERT_EQ(s.messages.size(), 12u) << what;
      const size_t payload = k == CollKind::Broadcast ? 3 : 12;
      for (const Message& m : s.messages) {
        EXPECT_EQ(m.count, payload) << what;
        EXPECT_EQ(m.receivedRound, s.messages.front().receivedRound) << what << ": one round";
      }
      EXPECT_EQ(s.programs[2].front().kind, algo::PrimitiveKind::PackExchange) << what;
    }
}

TEST(Simulation, WindowProgramsReadSlotsAfterTheirStep) {
  const Simulation one = simulate(request(CollKind::AllReduce, "oneshot", 4, 3));
  EXPECT_EQ(one.rounds, 4);  // put, post, wait, reduce
  EXPECT_EQ(one.messages.size(), 4u * 3u);
  for (const Message& m : one.messages) {
    EXPECT_NE(m.from, m.to);
    EXPECT_LT(m.sentRound, m.receivedRound);
  }
  const Simulation slice = simulate(request(CollKind::AllReduce, "slice", 3, 12, 6));
  EXPECT_TRUE(slice.wrong.empty());
  // Two pieces, two handshakes each.
  size_t waits = 0;
  for (const auto& st : slice.programs[0]) waits += st.kind == algo::PrimitiveKind::Wait;
  EXPECT_EQ(waits, 4u);
}

TEST(Simulation, RingAllReduceTakesTwoNMinusOneSteps) {
  for (int n : {2, 3, 4, 7}) {
    const Simulation s = simulate(request(CollKind::AllReduce, "ring", n, 4 * n));
    EXPECT_EQ(s.rounds, 2 * n - 1);
    EXPECT_EQ(s.messages.size(), static_cast<size_t>(2 * (n - 1) * n));
    // Every rank runs in every step: the ring never waits.
    EXPECT_EQ(s.actions.size(), static_cast<size_t>((2 * n - 1) * n));
  }
}

TEST(Simulation, PairwiseExchangesMeetInOneStep) {
  const Simulation s = simulate(request(CollKind::AllToAll, "pairwise", 4, 1));
  EXPECT_EQ(s.rounds, 4);  // the local copy, then three exchanges
  for (const Message& m : s.messages) EXPECT_EQ(m.receivedRound, m.sentRound);
}

TEST(Simulation, ValuesGrowStepByStep) {
  const Simulation s = simulate(request(CollKind::AllReduce, "ring", 3, 6));
  ASSERT_EQ(s.outputs.size(), static_cast<size_t>(s.rounds + 1));
  // Out of place: nothing before the first step; all of it after the last.
  for (int r = 0; r < 3; ++r) {
    for (Contributors c : s.outputs.front()[r]) EXPECT_EQ(c, 0u);
    for (Contributors c : s.outputs.back()[r]) EXPECT_EQ(c, 0b111u);
  }
  EXPECT_EQ(contributorsText(0b101, 3), "0.2");
}

void deadlockingProgram(algo::Primitives& p, const algo::CallShape& s) {
  p.recv(1 - s.rank, 0, s.count);  // both ranks wait for the other first
  p.send(1 - s.rank, 0, s.count);
}

TEST(Simulation, ADeadlockIsReported) {
  algo::AlgorithmProgram bad = *algo::findProgram(CollKind::AllReduce, "ring");
  bad.program = deadlockingProgram;
  Request r = request(CollKind::AllReduce, "ring", 2, 4);
  r.algorithm = &bad;
  const Simulation s = simulate(r);
  EXPECT_TRUE(s.deadlocked);
  EXPECT_EQ(s.rounds, 0);
}

void forgetfulRing(algo::Primitives& p, const algo::CallShape& s) {
  algo::ringAllReduce(p, s);
  if (s.rank == 0) p.copy(0, 0, 1);  // overwrites element 0 with rank 0's input alone
}

TEST(Simulation, AWrongResultIsNamed) {
  algo::AlgorithmProgram bad = *algo::findProgram(CollKind::AllReduce, "ring");
  bad.program = forgetfulRing;
  Request r = request(CollKind::AllReduce, "ring", 3, 6);
  r.algorithm = &bad;
  const Simulation s = simulate(r);
  ASSERT_EQ(s.wrong.size(), 1u);
  EXPECT_EQ(s.wrong[0], "rank 0 element 0: has 0.., wants 012");
}

// The plan's steps, costed one by one, give the tuner's formula wherever the
// formula assumes what the plan does (one message per step, no waiting).
// Broadcast's plan has one step more than its formula: the root's copy of
// its input (S·β), which both broadcast algorithms make, so the tuner leaves
// it out; it is checked as that difference.
TEST(Simulation, StepCostsSumToTheTunersFormula) {
  const CostParams p{2.0, 1.0 / 4000, 1.0 / 8000, "test"};
  struct Case {
    CollKind kind;
    const char* algorithm;
    size_t chunk;
    bool acrossHosts = false;
  };
  for (const Case& c : {Case{CollKind::AllReduce, "ring", 0}, Case{CollKind::AllReduce, "ring", 5},
                        Case{CollKind::AllReduce, "oneshot", 0},
                        Case{CollKind::AllReduce, "oneshot", 0, true},
                        Case{CollKind::AllReduce, "slice", 0},
                        Case{CollKind::AllReduce, "slice", 30},
                        Case{CollKind::Reduce, "chain", 4}, Case{CollKind::Broadcast, "ring", 4},
                        Case{CollKind::AllGather, "ring", 0},
                        Case{CollKind::ReduceScatter, "ring", 0},
                        Case{CollKind::Broadcast, "oneshot", 0}, Case{CollKind::Reduce, "oneshot", 0},
                        Case{CollKind::Gather, "oneshot", 0}, Case{CollKind::Scatter, "oneshot", 0}})
    for (int n : {2, 3, 5}) {
      const Request r = request(c.kind, c.algorithm, n, 60, c.chunk);  // n | 60: even chunks
      const Simulation s = simulate(c.acrossHosts ? acrossHosts(r) : r);
      double sum = 0;
      for (const RoundCost& rc : roundCosts(s, p)) sum += rc.total();
      const auto tuner = tunerPredictionUs(s, p);
      ASSERT_TRUE(tuner.has_value());
      const bool chain = c.kind == CollKind::Broadcast && std::string(c.algorithm) == "ring";
      const double rootCopy = chain ? 60 * 4 * p.betaUsPerB : 0.0;
      EXPECT_NEAR(sum, *tuner + rootCopy, 1e-9 * *tuner)
          << algo::collName(c.kind) << " " << c.algorithm << " n=" << n << " chunk=" << c.chunk
          << (c.acrossHosts ? " across hosts" : "");
    }
}

// The README has users export COIL_TUNE_FILE (a calibration of their
// transports) before it shows coil-sim: the simulated model keeps the costs
// coil-sim says it uses (built-in, or --alpha/--beta/--gamma), and neither
// that file nor COIL_TUNE reaches it. Before, the file's "shm" line was an
// unknown transport to the simulated model, and coil-sim --cost aborted.
TEST(Simulation, TheUsersTuningDoesNotReachTheSimulatedModel) {
  const CostParams p{2.0, 1.0 / 4000, 1.0 / 8000, "test"};
  struct Case {
    const char* algorithm;
    int n;
  };
  const Case cases[] = {{"ring", 5}, {"oneshot", 3}, {"slice", 2}};
  std::vector<double> plain;
  for (const Case& c : cases) {
    const Simulation s = simulate(request(CollKind::AllReduce, c.algorithm, c.n, 20));
    plain.push_back(*tunerPredictionUs(s, p) + algorithmCosts("shm", s).alphaUs);
  }
  char path[] = "/tmp/coil-sim-tune-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text =
      "# coil calibration\nshm alpha_us=50 beta_us_per_byte=0.1\ntcp alpha_us=70\n"
      "window/slice alpha_us=99\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  setenv("COIL_TUNE_FILE", path, 1);
  setenv("COIL_TUNE", "shm:alpha=77;window:alpha=88", 1);
  std::vector<double> tuned;
  for (const Case& c : cases) {
    const Simulation s = simulate(request(CollKind::AllReduce, c.algorithm, c.n, 20));
    try {
      tuned.push_back(*tunerPredictionUs(s, p) + algorithmCosts("shm", s).alphaUs);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.algorithm << ": " << e.what();
    }
  }
  unsetenv("COIL_TUNE_FILE");
  unsetenv("COIL_TUNE");
  unlink(path);
  EXPECT_EQ(tuned, plain);
}

TEST(Simulation, BadRequestsAreRefused) {
  Request r = request(CollKind::AllReduce, "ring", 0, 4);
  EXPECT_THROW(simulate(r), std::invalid_argument);
  r = request(CollKind::Broadcast, "ring", 3, 4);
  r.root = 3;
  EXPECT_THROW(simulate(r), std::invalid_argument);
  EXPECT_THROW(transportCosts("carrier-pigeon"), std::invalid_argument);
}

}  // namespace
}  // namespace coil::sim
