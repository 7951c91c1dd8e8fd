// gloo_perf: the coil_perf sweep (float, sum) over Gloo, as a baseline.
//
// Ranks are forked here (rank 0 is the parent), meet through a
// gloo::rendezvous::FileStore in a fresh temporary directory (rank 0 makes
// it and hands its name over the fork's pipes), and talk over
// Gloo's TCP transport on 127.0.0.1. Two algorithms:
//   --algo ring (default)  gloo::allreduce() with Algorithm::RING: the
//                          reduce-scatter + all-gather ring that PyTorch's
//                          Gloo backend calls for CPU tensors; supports
//                          separate input and output buffers.
//   --algo allreduce_ring  the older gloo::AllreduceRing class: in-place
//                          only, passes whole buffers around the ring. Its
//                          out-of-place column copies the input into the
//                          output first, inside the timed loop.
// Flags, output columns, JSON and result checking are coil_perf's
// (baseline_sweep.h).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/allreduce_ring.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "baseline_sweep.h"
#include "units.h"

using namespace coil_perf;

namespace {

/// One rank's Gloo context, connected over a FileStore.
class GlooRank final : public BaselineRank {
 public:
  GlooRank(int rank, int nranks, const std::string& storeDir, bool legacyRing) : legacyRing_(legacyRing) {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";  // loopback only
    attr.ai_family = AF_INET;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    context->setTimeout(std::chrono::seconds(60));
    gloo::rendezvous::FileStore store(storeDir);
    context->connectFullMesh(store, device);
    context_ = context;
  }

  void prepare(const float* /*in*/, float* out, size_t count) override {
    legacy_.reset();
    if (legacyRing_) {
      legacy_ = std::make_unique<gloo::AllreduceRing<float>>(context_, std::vector<float*>{out},
                                                             static_cast<int>(count));
    }
  }

  void allreduceFloatSum(const float* in, float* out, size_t count) override {
    if (!legacy_) return allreduce<float>(in, out, count, &gloo::sum<float>);
    // The older class reduces in place only: out of place copies first, timed.
    if (in != out) std::memcpy(out, in, count * sizeof(float));
    legacy_->run();
  }
  double maxOverRanks(double value) override {
    allreduce<double>(&value, &value, 1, &gloo::max<double>);
    return value;
  }
  uint64_t sumOverRanks(uint64_t value) override {
    allreduce<uint64_t>(&value, &value, 1, &gloo::sum<uint64_t>);
    return value;
  }
  void sumBytesOverRanks(uint8_t* bytes, size_t n) override {
    allreduce<uint8_t>(bytes, bytes, n, &gloo::sum<uint8_t>);
  }
  std::string transportName() const override {
    return legacyRing_ ? "gloo-tcp (AllreduceRing)" : "gloo-tcp (allreduce RING)";
  }

 private:
  /// out = sum over ranks of in (RING). in may equal out (in-place).
  template <typename T>
  void allreduce(const T* in, T* out, size_t count, void (*fn)(void*, const void*, const void*, size_t)) {
    gloo::AllreduceOptions opts(context_);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    if (in != out) opts.setInput(const_cast<T*>(in), count);
    opts.setOutput(out, count);
    opts.setReduceFunction(fn);
    opts.setTag(tag_++);
    gloo::allreduce(opts);
  }

  bool legacyRing_;
  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<gloo::AllreduceRing<float>> legacy_;
  uint32_t tag_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  bool legacyRing = false;
  std::string storeDir;  // rank 0 makes it and hands its name to the others
  BaselineTool tool;
  tool.name = "gloo_perf";
  tool.description = "float sum all-reduce sweep over Gloo (TCP, 127.0.0.1)";
  tool.extraUsage = "  --algo ring|allreduce_ring   gloo::allreduce RING (default) or gloo::AllreduceRing\n";
  tool.takeFlag = [&](const std::string& flag, const std::string& v) {
    if (flag != "--algo") return false;
    if (v != "ring" && v != "allreduce_ring") throw UsageError("--algo: '" + v + "' is not ring or allreduce_ring");
    legacyRing = v == "allreduce_ring";
    return true;
  };
  tool.connect = [&](LocalRanks& ranks, int rank, int nranks) -> std::unique_ptr<BaselineRank> {
    char dir[64] = "/tmp/gloo_perf.XXXXXX";
    if (rank == 0) {
      if (mkdtemp(dir) == nullptr) {
        ranks.abandon();
        throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
      }
      ranks.share(dir, sizeof(dir));
    } else {
      ranks.receive(dir, sizeof(dir));
    }
    storeDir = dir;
    return std::make_unique<GlooRank>(rank, nranks, storeDir, legacyRing);
  };
  tool.cleanUp = [&] {
    std::error_code ignored;
    if (!storeDir.empty()) std::filesystem::remove_all(storeDir, ignored);
  };
  BaselineOptions options;
  return runBaseline(argc, argv, options, tool);
}
