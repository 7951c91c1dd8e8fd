// memory_bw: the single-core memory yardsticks tools/compare prints next to
// the all-reduce numbers: memcpy and a float a+b loop over buffers larger
// than the caches. A shared-memory all-reduce cannot beat these per core.
//
// usage: memory_bw [SIZE (default 64M)] [REPS (default 10)]
// prints one JSON object: {"bytes": .., "memcpy_gbps": .., "add_gbps": ..}
// where GB/s counts the bytes written per second (1e9), best of REPS.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "units.h"

namespace {

template <typename F>
double bestSeconds(int reps, F&& body) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start;
    best = std::min(best, d.count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{64} << 20;
  int reps = 10;
  try {
    if (argc > 1) bytes = coil_perf::parseBytes(argv[1], "SIZE");
    if (argc > 2) reps = static_cast<int>(coil_perf::parseInteger(argv[2], "REPS", 1, 100000));
  } catch (const coil_perf::UsageError& e) {
    std::fprintf(stderr, "memory_bw: %s\nusage: memory_bw [SIZE] [REPS]\n", e.what());
    return 2;
  }
  const size_t n = std::max<size_t>(bytes / sizeof(float), 1);
  // Touch every page first so page faults are not timed.
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  const double copy = bestSeconds(reps, [&] { std::memcpy(c.data(), a.data(), n * sizeof(float)); });
  const double add = bestSeconds(reps, [&] {
    float* __restrict dst = c.data();
    const float* __restrict x = a.data();
    const float* __restrict y = b.data();
    for (size_t i = 0; i < n; ++i) dst[i] = x[i] + y[i];
  });
  // Keep the result observable so the loops are not optimised away.
  volatile float sink = c[n / 2];
  (void)sink;
  const double written = static_cast<double>(n * sizeof(float));
  std::printf("{\"bytes\": %zu, \"memcpy_gbps\": %.3f, \"add_gbps\": %.3f}\n", n * sizeof(float),
              written / copy / 1e9, written / add / 1e9);
  return 0;
}
