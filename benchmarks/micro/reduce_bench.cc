// Throughput of the reduction kernels, per ISA x dtype x op x working set,
// next to memcpy and the compiler's own c[i] = a[i] + b[i] (baseline_add.cc).
//
// Sizes are working sets: everything the call touches. A reduce of `count`
// elements touches 3 * count * elemsize bytes (two reads, one write), and
// that is what SetBytesProcessed reports, so bytes/s compare directly
// across dtypes and with the baselines:
//   memcpy     copies half the working set: bytes = read + written.
//   add/<isa>  float32 c = a + b over the same working set.
// Names: reduce/<isa>/<dtype>/<op>/<size>, divide/<isa>/<dtype>/<size>,
// baseline/memcpy/<size>, baseline/add/<flavour>/<size>.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "reduce/kernel_table.h"

// The three builds of baseline_add.cc (benchmarks/micro/meson.build).
void baselineAdd_sse2(float* c, const float* a, const float* b, size_t count);
void baselineAdd_avx2(float* c, const float* a, const float* b, size_t count);
void baselineAdd_avx512(float* c, const float* a, const float* b, size_t count);

namespace coil::reduce {
namespace {

struct Size {
  const char* name;
  size_t bytes;
};
constexpr Size kSizes[] = {{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}};

/// 64-byte aligned, zero-initialized (and so faulted in) bytes.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes)
      : data(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64))) {
    std::memset(data.get(), 0, (bytes + 63) / 64 * 64 + 64);
  }
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, Free> data;
};

/// Ordinary finite values: floats in [0.5, 2), integers anywhere. Sums and
/// products of these stay finite, so no kernel runs on NaN/Inf paths.
/// (A cheap generator: filling 64 MiB must not dominate the run.)
void fill(coilDataType_t type, unsigned char* p, size_t count, uint64_t seed) {
  const size_t size = typeSize(type);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t bits = state ^ (state >> 29);
    const float f = 0.5f + static_cast<float>(bits >> 40) * (1.5f / 16777216.0f);
    const double d = f;
    unsigned char* at = p + i * size;
    switch (type) {
      case coilFloat16: {
        const uint16_t h = floatToHalf(f);
        std::memcpy(at, &h, 2);
        break;
      }
      case coilBfloat16: {
        const uint16_t b = floatToBf16(f);
        std::memcpy(at, &b, 2);
        break;
      }
      case coilFloat32: std::memcpy(at, &f, 4); break;
      case coilFloat64: std::memcpy(at, &d, 8); break;
      default: std::memcpy(at, &bits, size); break;
    }
  }
}

void benchReduce(benchmark::State& state, Isa isa, coilDataType_t type, coilRedOp_t op, size_t workingSet) {
  const size_t size = typeSize(type), count = workingSet / (3 * size);
  AlignedBuffer a(count * size), b(count * size), dst(count * size);
  fill(type, a.data.get(), count, 1);
  fill(type, b.data.get(), count, 2);
  const ReduceFn fn = kernelFor(isa, type, op);
  for (auto _ : state) {
    fn(dst.data.get(), a.data.get(), b.data.get(), count);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 3 * count * size));
}

void benchDivide(benchmark::State& state, Isa isa, coilDataType_t type, size_t workingSet) {
  const size_t size = typeSize(type), count = workingSet / (2 * size);
  AlignedBuffer src(count * size), dst(count * size);
  fill(type, src.data.get(), count, 3);
  const DivideFn fn = dividerFor(isa, type);
  for (auto _ : state) {
    fn(dst.data.get(), src.data.get(), count, 7);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * count * size));
}

void benchMemcpy(benchmark::State& state, size_t workingSet) {
  const size_t bytes = workingSet / 2;
  AlignedBuffer src(bytes), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data.get(), src.data.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
}

using AddFn = void (*)(float*, const float*, const float*, size_t);

void benchAdd(benchmark::State& state, AddFn add, size_t workingSet) {
  const size_t count = workingSet / (3 * sizeof(float));
  AlignedBuffer a(count * 4), b(count * 4), c(count * 4);
  fill(coilFloat32, a.data.get(), count, 1);
  fill(coilFloat32, b.data.get(), count, 2);
  auto* pa = reinterpret_cast<const float*>(a.data.get());
  auto* pb = reinterpret_cast<const float*>(b.data.get());
  auto* pc = reinterpret_cast<float*>(c.data.get());
  for (auto _ : state) {
    add(pc, pa, pb, count);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 3 * count * sizeof(float)));
}

void registerAll() {
  struct Baseline {
    const char* name;
    Isa needs;
    AddFn fn;
  };
  const Baseline baselines[] = {{"sse2", Isa::kGeneric, &baselineAdd_sse2},
                                {"avx2", Isa::kAvx2, &baselineAdd_avx2},
                                {"avx512", Isa::kAvx512, &baselineAdd_avx512}};
  for (const Size& s : kSizes) {
    benchmark::RegisterBenchmark((std::string("baseline/memcpy/") + s.name).c_str(), benchMemcpy, s.bytes);
    for (const Baseline& base : baselines)
      if (cpuSupports(base.needs))
        benchmark::RegisterBenchmark((std::string("baseline/add/") + base.name + "/" + s.name).c_str(),
                                     benchAdd, base.fn, s.bytes);
  }
  for (Isa isa : availableIsas()) {
    for (int t = 0; t < coilNumTypes; ++t) {
      const auto type = static_cast<coilDataType_t>(t);
      const std::string prefix = std::string(isaName(isa)) + "/" + typeName(type) + "/";
      for (int o = 0; o < coilNumOps; ++o) {
        const auto op = static_cast<coilRedOp_t>(o);
        if (op == coilAvg || !takesType(op, type)) continue;  // avg runs sum's kernel
        for (const Size& s : kSizes)
          benchmark::RegisterBenchmark(("reduce/" + prefix + opName(op) + "/" + s.name).c_str(), benchReduce,
                                       isa, type, op, s.bytes);
      }
      benchmark::RegisterBenchmark(("divide/" + prefix + kSizes[0].name).c_str(), benchDivide, isa, type,
                                   kSizes[0].bytes);
    }
  }
}

}  // namespace
}  // namespace coil::reduce

int main(int argc, char** argv) {
  coil::reduce::registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
