#include "measure.h"

#include <stdlib.h>

#include <chrono>
#include <thread>
#include <vector>

#include "algorithms/rooted_oneshot_program.h"
#include "coil.h"

namespace coil::sim {
namespace {

// One call of the simulated collective on one rank.
coilResult_t runOnce(const Request& r, coilComm_t comm, const float* in, float* out) {
  const size_t n = r.count;
  switch (r.collective) {
    case algo::CollKind::AllReduce: return coilAllReduce(in, out, n, coilFloat32, coilSum, comm, nullptr);
    case algo::CollKind::Broadcast: return coilBroadcast(in, out, n, coilFloat32, r.root, comm, nullptr);
    case algo::CollKind::Reduce: return coilReduce(in, out, n, coilFloat32, coilSum, r.root, comm, nullptr);
    case algo::CollKind::AllGather: return coilAllGather(in, out, n, coilFloat32, comm, nullptr);
    case algo::CollKind::ReduceScatter:
      return coilReduceScatter(in, out, n, coilFloat32, coilSum, comm, nullptr);
    case algo::CollKind::AllToAll: return coilAlltoAll(in, out, n, coilFloat32, comm, nullptr);
    case algo::CollKind::Gather: return coilGather(in, out, n, coilFloat32, r.root, comm, nullptr);
    case algo::CollKind::Scatter: return coilScatter(in, out, n, coilFloat32, r.root, comm, nullptr);
    case algo::CollKind::Barrier: return coilBarrier(comm, nullptr);
    default: return coilInvalidArgument;
  }
}

}  // namespace

Measurement measure(const Simulation& s, const std::string& transport, int iterations) {
  const Request& r = s.request;
  Measurement m;
  // The FIFO one-shot and the rooted one-shot are measured on this host with
  // the window turned off, which is how the library runs them across hosts;
  // other layouts need hosts.
  const bool withoutWindow = s.form == Form::kFifo || s.form == Form::kExchange;
  if (spansHosts(r.hostOf) && !withoutWindow) {
    m.why = "the ranks of --measure share one host; the simulated hosts cannot be measured here";
    return m;
  }
  if (withoutWindow) setenv("COIL_SHM_WINDOW", "0", 1);
  if (s.form == Form::kExchange) {
    const size_t payload = algo::rootedPayloadElems(r.collective, r.nranks, r.count) * sizeof(float);
    if (!algo::rootedOneShotWithinCap(r.nranks, payload)) {
      m.why = "the library runs the rooted one-shot only while each rank sends at most " +
              std::to_string(algo::kRootedOneShotMaxSentBytes / 1024) +
              " KiB of data; this call sends " + std::to_string((r.nranks - 1) * payload) +
              " bytes";
      return m;
    }
  }
  if (r.algorithm->deviceOnly != algo::DeviceOnly::kNo) {
    m.why = std::string(r.algorithm->name) +
            (r.algorithm->readsCallerBuffers()
                 ? " runs on device buffers registered as windows (coilCommWindowRegister)"
                 : " runs on device buffers through the peer windows") +
            "; --measure runs host buffers";
    return m;
  }
  if (r.collective == algo::CollKind::Barrier) {
    m.why = "COIL_ALGO does not force a barrier's algorithm";
    return m;
  }
  // The simulated algorithm and chunk, forced for the real run.
  const std::string force = std::string(algo::collName(r.collective)) + ":" + r.algorithm->name;
  setenv("COIL_ALGO", force.c_str(), 1);
  setenv("COIL_TRANSPORT", transport.c_str(), 1);
  const int n = r.nranks;
  std::vector<coilComm_t> comms(n);
  if (coilCommInitAll(comms.data(), n, nullptr) != coilSuccess) {
    m.why = std::string("coilCommInitAll failed: ") + coilGetLastError(nullptr);
    return m;
  }
  constexpr int kWarmups = 5;
  std::vector<coilResult_t> results(n, coilSuccess);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank)
    threads.emplace_back([&, rank] {
      std::vector<float> in(s.inputElems, 1.0f), out(s.outputElems);
      for (int i = 0; i < kWarmups && results[rank] == coilSuccess; ++i)
        results[rank] = runOnce(r, comms[rank], in.data(), out.data());
      coilBarrier(comms[rank], nullptr);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations && results[rank] == coilSuccess; ++i)
        results[rank] = runOnce(r, comms[rank], in.data(), out.data());
      if (rank == 0)
        m.microseconds =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count() /
            iterations;
    });
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < n; ++rank) {
    if (results[rank] != coilSuccess && m.why.empty())
      m.why = "rank " + std::to_string(rank) + ": " + coilGetLastError(comms[rank]);
    coilCommDestroy(comms[rank]);
  }
  m.ran = m.why.empty();
  m.iterations = iterations;
  return m;
}

}  // namespace coil::sim
