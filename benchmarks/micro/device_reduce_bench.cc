// GPU reduction kernels (src/device/device_reduce.h) against a device-to-
// device cudaMemcpyAsync of the same buffers: how close the kernels come to
// the memory bandwidth the copy reaches.
//
//   device_reduce_bench [--mib N] [--iters N]     (defaults: 256 MiB, 20)
//
// Each row: a warm-up, then `iters` runs timed one by one with CUDA events;
// the median is reported. "GB/s moved" counts the bytes each run reads and
// writes (10^9 bytes a GB): a copy moves 2 × the buffer size, a reduce 3 ×
// (reads a and b, writes dst), a divide 2 ×, a chain of 4 terms 5 × in one
// pass and 9 × as three pairwise kernels (compare their times). "vs copy" is a row's moved-bytes
// rate over the copy's: the target is >= 0.90 for the reduce rows
// on the 16-byte-aligned (vector) path.
//
// Exits 77 (meson's "skipped") when no CUDA device is usable.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "device/cuda_diagnosis.h"
#include "device/device_reduce.h"
#include "device/half_device.h"

namespace {

namespace dt = coil::device::testing;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "device_reduce_bench: %s: %s: %s\n", what, cudaGetErrorName(err),
                 cudaGetErrorString(err));
    std::exit(1);
  }
}

size_t sizeOf(coilDataType_t t) {
  switch (t) {
    case coilInt8: case coilUint8: return 1;
    case coilFloat16: case coilBfloat16: return 2;
    case coilInt32: case coilUint32: case coilFloat32: return 4;
    default: return 8;
  }
}

/// Finite, ordinary values of type t (no NaN, Inf or subnormal), as bytes.
std::vector<unsigned char> pattern(coilDataType_t t, size_t bytes, int seed) {
  const size_t size = sizeOf(t), count = bytes / size;
  std::vector<unsigned char> out(bytes);
  for (size_t i = 0; i < count; ++i) {
    const float f = 1.0f + static_cast<float>((i * 2654435761u + static_cast<size_t>(seed)) % 4096) / 1024.0f;
    uint64_t bits = 0;
    switch (t) {
      case coilFloat16: bits = coil::device::half::floatToHalf(f); break;
      case coilBfloat16: bits = coil::device::half::floatToBf16(f); break;
      case coilFloat32: bits = coil::device::half::floatBits(f); break;
      case coilFloat64: {
        const double d = f;
        std::memcpy(&bits, &d, 8);
        break;
      }
      default: bits = i * 2654435761u + static_cast<size_t>(seed); break;
    }
    std::memcpy(out.data() + i * size, &bits, size);
  }
  return out;
}

struct Timing {
  double medianMs;
  double minMs;
};

Timing timeIt(cudaStream_t stream, int iters, const std::function<void()>& run) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) run();  // warm-up
  check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    run();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float elapsed = 0;
    check(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
    ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 256;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mib") == 0 && i + 1 < argc) mib = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) iters = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--mib N] [--iters N]\n", argv[0]);
      return 2;
    }
  }
  if (mib == 0 || iters < 1) {
    std::fprintf(stderr, "device_reduce_bench: --mib and --iters must be >= 1\n");
    return 2;
  }

  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("device_reduce_bench: no usable CUDA device (%s)\n",
                coil::device::describeCudaUnusable(err, devices).c_str());
    return 77;
  }
  int device = 0;
  cudaDeviceProp prop{};
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");

  const size_t bytes = mib << 20;
  unsigned char *a = nullptr, *b = nullptr, *dst = nullptr;
  check(cudaMalloc(&a, bytes + 256), "cudaMalloc");
  check(cudaMalloc(&b, bytes + 256), "cudaMalloc");
  check(cudaMalloc(&dst, bytes + 256), "cudaMalloc");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  const dt::HalfCodec codec = dt::defaultHalfCodec();
  const dt::HalfCodec otherCodec =
      codec == dt::HalfCodec::kHardware ? dt::HalfCodec::kSoftware : dt::HalfCodec::kHardware;
  auto codecName = [](dt::HalfCodec c) { return c == dt::HalfCodec::kHardware ? "hw" : "sw"; };

  std::printf("device_reduce_bench: %s, sm_%d%d, %d SMs; %zu MiB a buffer; median of %d timed runs "
              "after 3 warm-up runs; fp16 codec of reduceAsync: %s\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, mib, iters,
              codecName(codec));
  std::printf("%-34s %14s %10s %10s %11s %8s\n", "op", "bytes/buffer", "median us", "min us",
              "GB/s moved", "vs copy");

  double copyRate = 0;
  auto row = [&](const std::string& name, int buffersMoved, const Timing& t) {
    const double rate = static_cast<double>(buffersMoved) * static_cast<double>(bytes) / (t.medianMs * 1e6);
    if (copyRate == 0) copyRate = rate;
    std::printf("%-34s %14zu %10.1f %10.1f %11.1f %8.3f\n", name.c_str(), bytes, t.medianMs * 1e3,
                t.minMs * 1e3, rate, rate / copyRate);
    std::fflush(stdout);
  };

  try {
    check(cudaMemset(a, 0, bytes), "cudaMemset");
    row("memcpy D2D", 2, timeIt(stream, iters, [&] {
          check(cudaMemcpyAsync(dst, a, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
        }));

    struct Case {
      coilDataType_t type;
      coilRedOp_t op;
      const char* name;
    };
    const Case cases[] = {{coilFloat32, coilSum, "float32"},   {coilFloat16, coilSum, "float16"},
                          {coilBfloat16, coilSum, "bfloat16"}, {coilFloat64, coilSum, "float64"},
                          {coilInt32, coilSum, "int32"},       {coilInt8, coilSum, "int8"},
                          {coilFloat32, coilMax, "float32"}};
    coilDataType_t filled = static_cast<coilDataType_t>(-1);
    auto fill = [&](coilDataType_t type) {
      if (type == filled) return;
      const auto pa = pattern(type, bytes, 1), pb = pattern(type, bytes, 2);
      check(cudaMemcpy(a, pa.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      check(cudaMemcpy(b, pb.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      filled = type;
    };
    for (const Case& c : cases) {
      fill(c.type);
      const size_t count = bytes / sizeOf(c.type);
      std::string name = std::string("reduce ") + (c.op == coilSum ? "sum " : "max ") + c.name;
      if (c.type == coilFloat16) name += std::string(" (") + codecName(codec) + ")";
      row(name, 3, timeIt(stream, iters, [&] {
            coil::device::reduceAsync(dst, a, b, count, c.type, c.op, stream);
          }));
      if (c.type == coilFloat16) {
        row(std::string("reduce sum float16 (") + codecName(otherCodec) + ")", 3,
            timeIt(stream, iters, [&] {
              dt::reduceAsyncWith(otherCodec, dst, a, b, count, c.type, c.op, stream);
            }));
      }
    }
    // The scalar path (b 4 bytes off the others' 16-byte alignment), in place.
    fill(coilFloat32);
    const size_t count32 = bytes / 4;
    row("reduce sum float32 scalar path", 3, timeIt(stream, iters, [&] {
          coil::device::reduceAsync(dst, a, b + 4, count32, coilFloat32, coilSum, stream);
        }));
    row("reduce sum float32 in place", 3, timeIt(stream, iters, [&] {
          coil::device::reduceAsync(a, a, b, count32, coilFloat32, coilSum, stream);
        }));
    // Four terms, as the peer windows' reduceToSlot with 4 ranks: one pass
    // (reads 4 buffers, writes 1) against three pairwise kernels (9). The
    // terms repeat a and b; 256 MiB buffers do not stay in L2.
    const void* four[4] = {a, b, a, b};
    row("chain of 4 float32, one pass", 5, timeIt(stream, iters, [&] {
          coil::device::reduceChainAsync(dst, four, 4, count32, coilFloat32, coilSum, stream);
        }));
    row("chain of 4 float32, 3 pairwise", 9, timeIt(stream, iters, [&] {
          coil::device::reduceAsync(dst, a, b, count32, coilFloat32, coilSum, stream);
          coil::device::reduceAsync(dst, dst, a, count32, coilFloat32, coilSum, stream);
          coil::device::reduceAsync(dst, dst, b, count32, coilFloat32, coilSum, stream);
        }));
    row("divide float32 by 3", 2, timeIt(stream, iters, [&] {
          coil::device::divideAsync(dst, b, count32, coilFloat32, 3, stream);
        }));
    fill(coilFloat16);
    row(std::string("divide float16 by 3 (") + codecName(codec) + ")", 2, timeIt(stream, iters, [&] {
          coil::device::divideAsync(dst, b, bytes / 2, coilFloat16, 3, stream);
        }));
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "device_reduce_bench: %s\n", e.what());
    return 1;
  }
  std::printf("target: the reduce rows' \"vs copy\" >= 0.90\n");
  cudaStreamDestroy(stream);
  cudaFree(a);
  cudaFree(b);
  cudaFree(dst);
  return 0;
}
