// Random programs: long sequences of the calls real programs make, mixed as
// they mix them, every result checked against the independent reference
// (collective_reference.h). Run on host buffers by
// tests/collectives/random_program_test.cc and on the fake GPU's device
// buffers and streams by tests/device/fake_gpu_random_program_test.cc.
//
// The feature tests each check one thing, mostly on a fresh communicator.
// Programs do not. One communicator runs collectives of every kind, type,
// op, root and size one after another, so the tuner moves between
// algorithms and the transports' windows, FIFOs and slots are reused by
// calls of other kinds and sizes. Groups hold collectives of different
// kinds, sends and receives in any posting order (several on one pair, a
// send to the rank itself), or both at once. Every few calls the program
// moves to a child of a split (sharing the world's connections or not,
// made blocking or non-blocking: the world runs on while the child joins)
// and back. A seed draws the program, the same on every rank, and the
// COIL_ALGO it runs under; each call's data carries a salt drawn with it,
// so an output left over from an earlier call of the same shape cannot pass
// for this one's. Calls on streams are checked in batches: a program
// waits for its stream only now and then, as real ones do.
//
// A failure names its seed: COIL_PROGRAM_SEED=<seed> runs that program
// alone (with the same standard library: std::shuffle is not portable).
// COIL_PROGRAMS=<k> runs k programs per setup, to hunt; COIL_PROGRAM_TRACE=1
// prints each step as it is made (a crash leaves no other trace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coil.h"
#include "harness/collective_reference.h"

namespace coil::test::programs {

/// One point-to-point message of a group, between ranks of the step's
/// communicator (src == dst: a send to the rank itself).
struct Message {
  int src, dst;
  size_t count;
  coilDataType_t type;
  uint32_t salt;
};

/// One step of a program, as a communicator of n ranks runs it: a barrier,
/// one collective on its own, or a group of collectives and messages.
struct Step {
  bool barrier = false;
  bool grouped = false;
  std::vector<CollectiveCase> calls;
  std::vector<Message> messages;
  uint64_t orderSeed = 0;  // how each rank orders its part of a group
};

/// A program: which communicator each step runs on and the seed it is
/// drawn from (drawn again on each communicator, for its rank count), and
/// after which steps the program waits for its calls to complete.
struct Program {
  std::string algo;  // COIL_ALGO
  bool splitShare;   // the child sends over the world's connections
  bool splitNonBlocking;  // the child joins while the world runs its steps
  struct Entry {
    bool onChild;
    uint64_t seed;
    bool waitAfter;  // wait for the calls so far (always before switching)
  };
  std::vector<Entry> steps;
};

Program drawProgram(uint64_t seed);
Step drawStep(uint64_t stepSeed, int nranks);

/// Where a program's buffers live and how its calls complete: host memory
/// whose calls are done when they return, or device memory and a stream.
class Memory {
 public:
  virtual ~Memory() = default;
  /// At least `bytes` (and at least 1) that the calls may use and this
  /// process may read and write, until the last owner lets go.
  virtual std::shared_ptr<uint8_t> allocate(size_t bytes) = 0;
  /// The stream calls on `comm` go on (nullptr: host calls).
  virtual coilStream_t streamOf(coilComm_t comm) = 0;
  /// Waits until every call made on `comm` has run; the error of one that
  /// failed after it returned (coilCommGetAsyncError), else coilSuccess.
  virtual coilResult_t finish(coilComm_t comm) = 0;
};

/// Runs program `seed` on this rank of `world` and a child of it (odd and
/// even ranks, highest first), made at the start; every failure is a gtest
/// failure naming the seed, the step and the rank. A call that fails stops
/// the rank: its peers' next calls fail on its departure or their deadlines.
void runProgram(uint64_t seed, const Program& program, coilComm_t world, int rank, int nranks,
                Memory& memory);

/// The seeds a setup runs: `base`, base + 1, ... (`programs` of them, or
/// COIL_PROGRAMS), or COIL_PROGRAM_SEED alone.
std::vector<uint64_t> seedsFrom(uint64_t base, uint64_t programs);

}  // namespace coil::test::programs
