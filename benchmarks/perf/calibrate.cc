#include "calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>

#include "coil_calls.h"
#include "core/cpu_cache.h"  // header-only: the cache size the tuner uses
#include "calibration_fit.h"
#include "expect.h"
#include "model_fit.h"
#include "predict.h"
#include "units.h"

namespace coil_perf {
namespace {

constexpr int kRepetitions = 5;  // per size: the best is fitted, the median shown beside it
constexpr size_t kGammaFromBytes = size_t{256} << 10;  // γ is fitted from here up
constexpr double kSettleSeconds = 0.5;                 // see Bench::settle

// A communicator split off `parent` while COIL_ALGO=`algo`: coil reads the
// variable when a communicator is created, so the child runs `algo` and the
// parent keeps its own choice. The variable is restored at once; no other
// thread reads it meanwhile (coil reads its environment while creating a
// communicator, and no other is being created).
class ForcedAlgoComm {
 public:
  ForcedAlgoComm(coilComm_t parent, int rank, const char* algo) {
    const char* old = std::getenv("COIL_ALGO");
    const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
    setenv("COIL_ALGO", algo, 1);
    const coilResult_t r = coilCommSplit(parent, 0, rank, &comm_, nullptr);
    if (saved)
      setenv("COIL_ALGO", saved->c_str(), 1);
    else
      unsetenv("COIL_ALGO");
    coilCheck(r, "coilCommSplit", parent);
  }
  ~ForcedAlgoComm() {
    if (comm_ != nullptr) coilCommDestroy(comm_);
  }
  ForcedAlgoComm(const ForcedAlgoComm&) = delete;
  ForcedAlgoComm& operator=(const ForcedAlgoComm&) = delete;
  coilComm_t get() const { return comm_; }

 private:
  coilComm_t comm_ = nullptr;
};

// Fails every rank together when one rank could not go on (e.g. rank 0 could
// not read --model), instead of leaving the others in the next collective.
void agreeOrThrow(coilComm_t comm, const std::string& localError) {
  if (maxOverRanks(comm, localError.empty() ? 0.0 : 1.0) == 0.0) return;
  throw std::runtime_error(localError.empty() ? "another rank failed (see its message)"
                                              : localError);
}

std::string transportInUse(const Options& opts, const std::vector<std::string>& rankHosts) {
  if (!opts.transport.empty()) return opts.transport;
  const char* env = std::getenv("COIL_TRANSPORT");
  if (env && *env) return env;
  // coil picks shm between ranks on one host and tcp otherwise.
  const auto host = [](const std::string& text) { return text.substr(text.find(" on ") + 4); };
  for (const std::string& r : rankHosts) {
    if (host(r) != host(rankHosts.front())) return "tcp";
  }
  return "shm";
}

// The one buffer of the in-place calls, page aligned.
struct Buffer {
  explicit Buffer(size_t bytes) : data(allocate(bytes), std::free) {}
  static void* allocate(size_t bytes) {
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + 4096);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  std::unique_ptr<void, void (*)(void*)> data;
};

// One size's times: the best repetition (fitted and compared with the
// model) and the median (shown, to tell how much the host disturbed it).
struct Timed {
  Sample best;
  double medianUs;
};

std::vector<Sample> bestOf(const std::vector<Timed>& timed) {
  std::vector<Sample> out;
  for (const Timed& t : timed) out.push_back(t.best);
  return out;
}

// The context every measurement here shares.
struct Bench {
  const Options& opts;
  int rank;
  int nranks;
  Buffer buffer;
  bool printer;

  // The in-place call of `coll` on `layout` (float elements). In place,
  // because coil's out-of-place all-gather also copies the rank's own block
  // (S/n bytes: at n = 2 as many as it sends), a cost the model does not
  // have; all-reduce is timed in place too, to match.
  CollCall inPlaceCall(Collective coll, const Layout& layout) {
    CollCall call;
    call.coll = coll;
    call.count = layout.count;
    call.type = typeInfo(coilFloat32);
    call.op = coilSum;
    inPlacePointers(coll, buffer.data.get(), layout, call.type.size, rank, &call.send, &call.recv);
    return call;
  }

  // Before the first timed size on a communicator: calls at `bytes` until
  // kSettleSeconds have passed (and at least -w calls), as nccl-tests warms
  // up at the largest size. Besides first-use costs, this lets the kernel
  // spread freshly started ranks over the cores: two ranks that share a core
  // hand a slot over through the scheduler, ~20x slower than two that spin
  // on two cores, and a timing taken before that happened is the scheduler's.
  void settle(Collective coll, size_t bytes, coilComm_t comm) {
    const Layout layout = layoutFor(coll, bytes, 4, nranks);
    if (layout.count == 0) return;
    const CollCall call = inPlaceCall(coll, layout);
    fillCollectiveInput(call, layout, rank, nranks);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1;; ++i) {
      runCoil(call, comm, rank, nranks);
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      const bool done = i >= opts.warmup && elapsed.count() >= kSettleSeconds;
      if (maxOverRanks(comm, done ? 1.0 : 0.0) > 0) return;  // every rank stops at once
    }
  }

  // kRepetitions of timeCoil, in µs, for the in-place call of `coll` on
  // `bytes`; nullopt when the size holds no element (per rank).
  std::optional<Timed> time(Collective coll, size_t bytes, coilComm_t comm) {
    const Layout layout = layoutFor(coll, bytes, 4, nranks);
    if (layout.count == 0) return std::nullopt;
    const CollCall call = inPlaceCall(coll, layout);
    double us[kRepetitions];
    for (double& t : us) {
      // Fresh inputs each time: in-place sums grow by n per call.
      fillCollectiveInput(call, layout, rank, nranks);
      // The slowest rank's time, whatever -a says: the model predicts when
      // the collective is done everywhere.
      t = 1e6 * timeCoil(call, comm, rank, nranks, Timing{opts.warmup, opts.iters});
    }
    std::sort(us, us + kRepetitions);
    return Timed{{static_cast<double>(layout.bytes), us[0]}, us[kRepetitions / 2]};
  }

  // settle(), then time() at every size of `sizes`.
  std::vector<Timed> timeAll(Collective coll, const std::vector<size_t>& sizes, coilComm_t comm) {
    std::vector<Timed> out;
    if (sizes.empty()) return out;
    settle(coll, sizes.back(), comm);
    for (size_t bytes : sizes) {
      if (auto t = time(coll, bytes, comm)) out.push_back(*t);
    }
    return out;
  }

  // The sweep's sizes from `from` bytes up, without repeats of one layout.
  std::vector<size_t> sizes(Collective coll, size_t from) const {
    std::vector<size_t> out;
    size_t previous = SIZE_MAX;
    for (size_t bytes : sweepSizes(opts.minBytes, opts.maxBytes, opts.factor, opts.stepBytes)) {
      const size_t count = layoutFor(coll, bytes, 4, nranks).count;
      if (bytes < from || count == 0 || count == previous) continue;
      previous = count;
      out.push_back(bytes);
    }
    return out;
  }
};

double errorPercent(double predicted, double measured) {
  return measured > 0 ? 100.0 * (predicted - measured) / measured : 0.0;
}

double gbPerS(double usPerByte) { return usPerByte > 0 ? 1e-3 / usPerByte : INFINITY; }

std::string today() {
  char text[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
  return text;
}

// "# <title>" and one line per size: best and median time, the model's
// time and its error against the best, then the error of a model fitted
// without that size (heldOut; "n/a" when the other sizes cannot be fitted).
// Only the held-out error says how well the model predicts a size it has
// not seen.
template <typename Predict, typename HeldOut>
void printFit(const char* title, const std::vector<Timed>& timed, Predict predicted,
              HeldOut heldOut) {
  std::printf("# %s\n# %10s %11s %11s %11s %8s %12s\n", title, "size(B)", "best(us)",
              "median(us)", "model(us)", "err(%)", "held-out(%)");
  for (const Timed& t : timed) {
    const double p = predicted(t.best.bytes);
    const std::optional<double> h = heldOut(t.best.bytes);
    char held[32] = "n/a";
    if (h) std::snprintf(held, sizeof held, "%.1f", errorPercent(*h, t.best.us));
    std::printf("  %10.0f %11.2f %11.2f %11.2f %8.1f %12s\n", t.best.bytes, t.best.us,
                t.medianUs, p, errorPercent(p, t.best.us), held);
  }
}

// The cache the tuner assumes when sysfs does not tell (src/tune/tuner.cc).
constexpr size_t kAssumedCacheBytes = size_t{8} << 20;

size_t machineCacheBytes() {
  const size_t bytes = coil::lastLevelCacheBytes();
  return bytes != 0 ? bytes : kAssumedCacheBytes;
}

Calibration calibrate(Bench& b, coilComm_t comm, const std::string& transport, size_t chunk) {
  if (b.printer) {
    std::printf(
        "# Calibration of transport %s, %d ranks: %d repetitions of %d+%d calls per size;"
        " the best is fitted\n#\n",
        transport.c_str(), b.nranks, kRepetitions, b.opts.warmup, b.opts.iters);
  }
  const std::vector<Timed> gather =
      b.timeAll(Collective::AllGather, b.sizes(Collective::AllGather, 0), comm);
  std::vector<Timed> ring, tree;
  std::vector<size_t> sizes = b.sizes(Collective::AllReduce, kGammaFromBytes);
  if (sizes.empty()) sizes = {b.opts.maxBytes};  // -e below 256 KiB: the largest size only
  {
    ForcedAlgoComm ringComm(comm, b.rank, "allreduce:ring");
    ring = b.timeAll(Collective::AllReduce, sizes, ringComm.get());
  }
  {
    ForcedAlgoComm treeComm(comm, b.rank, "allreduce:tree");
    tree = b.timeAll(Collective::AllReduce, sizes, treeComm.get());
  }

  const CalibrationSamples samples{bestOf(gather), bestOf(ring), bestOf(tree)};
  const FitSetting setting{b.nranks, chunk, machineCacheBytes()};
  const CalibrationFit fit = fitCalibration(samples, setting);
  const Calibration& c = fit.model;
  const double rawGamma = fit.rawGamma;
  const ModelParams& m = c.ring;
  if (!b.printer) return c;
  auto heldOut = [&](Fitted which) {
    return [&, which](double S) { return heldOutPredictionUs(samples, setting, which, S); };
  };

  std::printf("# last-level cache %zu KiB: beta and gamma x memory_factor from %zu B per rank\n#\n",
              m.cacheBytes >> 10, m.cacheBytes / (4 * static_cast<size_t>(b.nranks)));
  std::printf("# err(%%): the fitted model against the best time; held-out(%%): a model fitted\n"
              "#   without that size, i.e. how well it predicts sizes it has not seen\n#\n");
  printFit("in-place all-gather (ring): T = (n-1)*alpha + k*(n-1)/n*S*beta, k the ring's", gather,
           [&](double S) { return predictAllGatherUs(m, b.nranks, S); }, heldOut(Fitted::AllGather));
  const std::string ringTitle =
      "in-place all-reduce ring (COIL_ALGO=allreduce:ring): T = 2(n-1)*rounds*alpha + "
      "k*(2(n-1)/n*S*beta + (n-1)/n*S*gamma),\n#   rounds = ceil(S / (n*chunk)), chunk " +
      std::to_string(chunk) + " B (estimated)";
  std::printf("#\n");
  printFit(ringTitle.c_str(), ring,
           [&](double S) { return predictRingAllReduceUs(m, b.nranks, S, chunk); },
           heldOut(Fitted::Ring));
  std::printf("#\n");
  printFit("in-place all-reduce tree (COIL_ALGO=allreduce:tree): T = (2*depth + 2*(chunks-1))*alpha"
           " + k*(L*S*beta + R*S*gamma),\n#   its own beta and k; alpha and gamma the ring's", tree,
           [&](double S) { return predictTreeAllReduceUs(c.tree, b.nranks, S, chunk); },
           heldOut(Fitted::Tree));
  std::printf(
      "#\n# fitted: alpha %.3f us, beta %.4g us/B (%.2f GB/s), gamma %.4g us/B (%.2f GB/s),"
      " memory factor %.2f;\n#   tree: beta %.4g us/B, memory factor %.2f\n",
      m.alphaUs, m.betaUsPerByte, gbPerS(m.betaUsPerByte), m.gammaUsPerByte,
      gbPerS(m.gammaUsPerByte), m.memoryFactor, c.tree.betaUsPerByte, c.tree.memoryFactor);
  if (rawGamma < 0) {
    std::printf(
        "# note: the ring all-reduce ran faster than alpha and beta alone predict (gamma"
        " fitted %.4g us/B,\n#   clamped to 0): all-gather moves its bytes more slowly"
        " than the all-reduce ring here.\n",
        rawGamma);
  }
  return c;
}

void predict(Bench& b, coilComm_t comm, const std::string& transport, size_t chunk,
             const Calibration& c) {
  const std::vector<size_t> sizes = b.sizes(Collective::AllReduce, 0);
  std::vector<Timed> ring, tree;
  {
    ForcedAlgoComm ringComm(comm, b.rank, "allreduce:ring");
    ring = b.timeAll(Collective::AllReduce, sizes, ringComm.get());
  }
  {
    ForcedAlgoComm treeComm(comm, b.rank, "allreduce:tree");
    tree = b.timeAll(Collective::AllReduce, sizes, treeComm.get());
  }
  if (!b.printer) return;
  std::string model = calibrationLines(transport, c);
  for (size_t at = model.find('\n'); at != std::string::npos; at = model.find('\n', at + 1))
    model.replace(at, 1, "\n#        ");
  std::printf(
      "#\n# Predicted vs measured in-place all-reduce (float sum): transport %s, %d ranks, "
      "chunk %zu B (estimated);\n# best and median of %d repetitions of %d+%d calls; model: %s\n",
      transport.c_str(), b.nranks, chunk, kRepetitions, b.opts.warmup, b.opts.iters,
      model.c_str());
  std::printf("# %10s | %10s %10s %10s %7s | %10s %10s %10s %7s | %5s %6s\n", "size(B)",
              "ring best", "median", "model", "err(%)", "tree best", "median", "model", "err(%)",
              "model", "faster");
  for (size_t i = 0; i < ring.size() && i < tree.size(); ++i) {
    const double S = ring[i].best.bytes;
    const double pr = predictRingAllReduceUs(c.ring, b.nranks, S, chunk);
    const double pt = predictTreeAllReduceUs(c.tree, b.nranks, S, chunk);
    const double r = ring[i].best.us, t = tree[i].best.us;
    std::printf("  %10.0f | %10.2f %10.2f %10.2f %7.1f | %10.2f %10.2f %10.2f %7.1f | %5s %6s\n", S,
                r, ring[i].medianUs, pr, errorPercent(pr, r), t, tree[i].medianUs, pt,
                errorPercent(pt, t), pt < pr ? "tree" : "ring", t < r ? "tree" : "ring");
  }
  std::fflush(stdout);
}

}  // namespace

void runModelTools(const Options& opts, const Participant& self,
                   const std::vector<std::string>& rankHosts, bool printer) {
  const int n = self.nranks();
  if (n < 2) throw UsageError("--calibrate and --predict need at least 2 ranks (-P 2)");
  coilComm_t comm = self.comm();
  const std::string transport = transportInUse(opts, rankHosts);
  const size_t chunk = estimatedChunkBytes(transport);
  Bench bench{opts, self.rank(), n, Buffer(opts.maxBytes), printer};

  Calibration model;
  if (!opts.calibratePath.empty()) {
    model = calibrate(bench, comm, transport, chunk);
    std::string error;
    if (printer) {
      try {
        char host[256] = {0};
        gethostname(host, sizeof(host) - 1);
        writeCalibrationFile(opts.calibratePath, transport, model, n, host, today());
        std::printf("# wrote %s:\n%s\n", opts.calibratePath.c_str(),
                    calibrationLines(transport, model).c_str());
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    agreeOrThrow(comm, error);
  }
  if (opts.predict) {
    std::string error;
    if (!opts.modelPath.empty() && printer) {
      try {
        model = readCalibrationFile(opts.modelPath, transport);
        model.ring.cacheBytes = model.tree.cacheBytes = machineCacheBytes();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    agreeOrThrow(comm, error);
    predict(bench, comm, transport, chunk, model);
  }
  std::fflush(stdout);
}

}  // namespace coil_perf
