// Random programs (harness/random_program.h) on the fake GPU's device
// buffers and streams (fake_device.cc): the library's whole device path,
// the peer windows and the staged path mixed in one program as sizes come,
// collectives, groups and sends and receives queued on a stream per
// communicator and checked only when the program waits for it. Ranks as
// threads (host order) and as processes (stream order), 2, 3 and 5 ranks;
// 2 programs per setup.
// A failure names its seed; COIL_PROGRAM_SEED=<seed> runs that program
// alone, COIL_PROGRAMS=<k> runs k programs per setup.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device/device.h"
#include "harness/random_program.h"
#include "harness/run_ranks.h"
#include "tests/device/fake_device.h"

namespace coil::test {
namespace {

// Device buffers of the fake GPU and a stream for each communicator; a
// call has completed once its stream has run it.
class FakeDeviceMemory final : public programs::Memory {
 public:
  ~FakeDeviceMemory() override {
    for (auto& [comm, stream] : streams_) device::destroyStream(stream);
  }
  std::shared_ptr<uint8_t> allocate(size_t bytes) override {
    return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(device::allocDevice(bytes)),
                                    [](uint8_t* p) { device::freeDevice(p); });
  }
  coilStream_t streamOf(coilComm_t comm) override {
    device::Stream& s = streams_[comm];
    if (s == nullptr) s = device::createStream();
    return s;
  }
  coilResult_t finish(coilComm_t comm) override {
    device::syncStream(streamOf(comm));
    coilResult_t async = coilSuccess;
    const coilResult_t rc = coilCommGetAsyncError(comm, &async);
    return rc != coilSuccess ? rc : async;
  }

 private:
  std::map<coilComm_t, device::Stream> streams_;
};

struct GpuSetup {
  RankSetup ranks;
  const char* paths;  // "staged", "windows" or "legacy_ipc"
};

class FakeGpuRandomPrograms : public ::testing::TestWithParam<GpuSetup> {};

TEST_P(FakeGpuRandomPrograms, EveryCallOfTheProgramMatchesTheReference) {
  const GpuSetup& s = GetParam();
  const std::string paths = s.paths;
  // Slots of 4 KiB (many pieces) and calls of 4 KiB or more on the
  // windows: a program's small calls are staged, its others take the
  // windows, in one stream.
  ScopedEnv windowBytes("COIL_PEER_WINDOW_BYTES", paths == "staged" ? "0" : "4096");
  ScopedEnv minBytes("COIL_PEER_MIN_BYTES", "4096");
  ScopedEnv sharing("COIL_PEER_IPC", paths == "legacy_ipc" ? "legacy" : "auto");
  const uint64_t base = 50000 + static_cast<uint64_t>(s.ranks.nranks) * 1000 +
                        (s.ranks.launch == Launch::Threads ? 0 : 100) +
                        (paths == "staged" ? 0 : paths == "windows" ? 10 : 20);
  for (uint64_t seed : programs::seedsFrom(base, 2)) {
    const programs::Program program = programs::drawProgram(seed);
    SCOPED_TRACE(::testing::Message() << "COIL_PROGRAM_SEED=" << seed);
    ScopedEnv algo("COIL_ALGO", program.algo);
    runRanks(s.ranks, [&](coilComm_t world, int rank) {
      FakeDeviceMemory memory;
      programs::runProgram(seed, program, world, rank, s.ranks.nranks, memory);
    });
  }
}

std::vector<GpuSetup> setups() {
  std::vector<GpuSetup> out;
  for (Launch launch : {Launch::Threads, Launch::Processes}) {
    for (int n : {2, 3, 5}) out.push_back({{n, launch, "shm"}, "windows"});
    out.push_back({{3, launch, "shm"}, "staged"});
    out.push_back({{3, launch, "shm"}, "legacy_ipc"});
    out.push_back({{3, launch, "tcp"}, "windows"});
  }
  return out;
}

std::string name(const ::testing::TestParamInfo<GpuSetup>& info) {
  return paramName(info.param.ranks) + "_" + info.param.paths;
}

INSTANTIATE_TEST_SUITE_P(Ranks, FakeGpuRandomPrograms, ::testing::ValuesIn(setups()), name);

}  // namespace
}  // namespace coil::test
