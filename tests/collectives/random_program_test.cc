// Random programs (harness/random_program.h) on host buffers: 2-7 ranks,
// threads and processes, shm and tcp (and, as processes, two hosts: shm
// inside each, tcp across); 3 programs per setup. A failure
// names its seed; COIL_PROGRAM_SEED=<seed> runs that program alone,
// COIL_PROGRAMS=<k> runs k programs per setup.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "harness/random_program.h"
#include "harness/run_ranks.h"

namespace coil::test {
namespace {

// Host buffers: every call has completed when it returns.
class HostMemory final : public programs::Memory {
 public:
  std::shared_ptr<uint8_t> allocate(size_t bytes) override {
    return std::shared_ptr<uint8_t>(new uint8_t[std::max<size_t>(bytes, 1)],
                                    std::default_delete<uint8_t[]>());
  }
  coilStream_t streamOf(coilComm_t) override { return nullptr; }
  coilResult_t finish(coilComm_t) override { return coilSuccess; }
};

class RandomPrograms : public ::testing::TestWithParam<RankSetup> {};

TEST_P(RandomPrograms, EveryCallOfTheProgramMatchesTheReference) {
  const RankSetup& setup = GetParam();
  // Different setups run different programs; each setup the same ones
  // every time, so that a failure in CI comes back here.
  const uint64_t base = static_cast<uint64_t>(setup.nranks) * 1000 +
                        (setup.launch == Launch::Threads ? 0 : 100) +
                        (setup.transport == "tcp" ? 10000 : 0) +
                        (setup.transport == kTwoHosts ? 20000 : 0);
  for (uint64_t seed : programs::seedsFrom(base, 3)) {
    const programs::Program program = programs::drawProgram(seed);
    SCOPED_TRACE(::testing::Message() << "COIL_PROGRAM_SEED=" << seed);
    ScopedEnv algo("COIL_ALGO", program.algo);
    runRanks(setup, [&](coilComm_t world, int rank) {
      HostMemory memory;
      programs::runProgram(seed, program, world, rank, setup.nranks, memory);
    });
  }
}

std::vector<RankSetup> setups(Launch launch) {
  std::vector<RankSetup> out;
  for (const std::string& transport : testedTransports(launch))
    for (int n : {2, 3, 4, 5, 7})
      if (joinsBothKinds(transport, n)) out.push_back({n, launch, transport});
  return out;
}

std::string name(const ::testing::TestParamInfo<RankSetup>& info) { return paramName(info.param); }

INSTANTIATE_TEST_SUITE_P(Threads, RandomPrograms, ::testing::ValuesIn(setups(Launch::Threads)),
                         name);
INSTANTIATE_TEST_SUITE_P(Procs, RandomPrograms, ::testing::ValuesIn(setups(Launch::Processes)),
                         name);

}  // namespace
}  // namespace coil::test
