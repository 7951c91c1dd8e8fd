// GPU reduction kernels: dst[i] = a[i] op b[i] and dst[i] = src[i] / d, bit
// for bit what the CPU kernels of src/reduce compute (see device_reduce.h
// and reduce/reduce.h for the rules).
//
// Structure: one kernel template, instantiated per (element type, operator)
// from a functor that maps raw element bits to raw result bits. Elements are
// handled as unsigned integers of their width ("Raw") everywhere except
// inside the functors, so loads, stores, packing and alignment never depend
// on the type's arithmetic.
//
// Memory paths, chosen per call from the pointers:
//   * vector: dst, a (and b) have the same address modulo 16 and it is a
//     multiple of the element size: a few scalar head elements up to the
//     first 16-byte boundary, then 16-byte loads/stores, then a scalar tail;
//   * scalar: every other case, element-sized loads when all pointers are
//     aligned to the element size, byte loads (assembled little-endian)
//     when one is not (a GPU faults on a misaligned access).
// All three parts run in the same launch (grid-stride loops).
//
// Arithmetic: float ops use the explicitly rounded intrinsics (__fadd_rn,
// __fmul_rn, __fdiv_rn, __dadd_rn, ...): IEEE round-to-nearest-even, never
// contracted into an FMA, never flushed to zero (FTZ would apply only with
// -ftz=true, which coil never passes; -use_fast_math must not be used). NaN
// results are detected on the bits and replaced by the canonical NaN; max
// and min test their inputs for NaN on the bits, compare the (exactly
// widened) values and select one operand's original bits, so they never
// narrow anything.
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <type_traits>

#include "core/error.h"
#include "device/device_reduce.h"
#include "device/half_device.h"
#include "reduce/reduce.h"

namespace coil::device {
namespace {

using testing::HalfCodec;

/// The fp16 codec of the public entry points. See device_reduce.h: both
/// codecs are tested bit for bit by tests/gpu/device_reduce_test.cc; the
/// hardware one is a few instructions, the software one a few dozen (it can
/// make fp16 kernels compute-bound).
constexpr HalfCodec kDefaultHalfCodec = HalfCodec::kHardware;

enum class Op { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kBand = 4, kBor = 5, kBxor = 6 };

constexpr int kThreads = 256;  // per block
constexpr int kUnroll = 4;     // 16-byte vectors per thread per loop iteration
constexpr int kMaxBlocksPerSm = 2048 / kThreads;  // as many as an SM can hold

// ---- element types ----------------------------------------------------------

enum class Kind { kSigned, kUnsigned, kHalf, kBf16, kFloat, kDouble };

/// Raw: the unsigned integer of the element's width. Int: the integer type
/// (signed or not) of integer elements.
template <coilDataType_t kType> struct Traits;
template <> struct Traits<coilInt8> { using Raw = uint8_t; using Int = int8_t; static constexpr Kind kKind = Kind::kSigned; };
template <> struct Traits<coilUint8> { using Raw = uint8_t; using Int = uint8_t; static constexpr Kind kKind = Kind::kUnsigned; };
template <> struct Traits<coilInt32> { using Raw = uint32_t; using Int = int32_t; static constexpr Kind kKind = Kind::kSigned; };
template <> struct Traits<coilUint32> { using Raw = uint32_t; using Int = uint32_t; static constexpr Kind kKind = Kind::kUnsigned; };
template <> struct Traits<coilInt64> { using Raw = uint64_t; using Int = int64_t; static constexpr Kind kKind = Kind::kSigned; };
template <> struct Traits<coilUint64> { using Raw = uint64_t; using Int = uint64_t; static constexpr Kind kKind = Kind::kUnsigned; };
template <> struct Traits<coilFloat16> { using Raw = uint16_t; using Int = void; static constexpr Kind kKind = Kind::kHalf; };
template <> struct Traits<coilFloat32> { using Raw = uint32_t; using Int = void; static constexpr Kind kKind = Kind::kFloat; };
template <> struct Traits<coilFloat64> { using Raw = uint64_t; using Int = void; static constexpr Kind kKind = Kind::kDouble; };
template <> struct Traits<coilBfloat16> { using Raw = uint16_t; using Int = void; static constexpr Kind kKind = Kind::kBf16; };

constexpr uint32_t kNanF32 = 0x7FC00000u;
constexpr uint64_t kNanF64 = 0x7FF8000000000000ull;
constexpr uint16_t kNanF16 = 0x7E00u;
constexpr uint16_t kNanBf16 = 0x7FC0u;

__device__ __forceinline__ bool isNanF32(uint32_t bits) { return (bits & 0x7FFFFFFFu) > 0x7F800000u; }
__device__ __forceinline__ bool isNanF64(uint64_t bits) {
  return (bits & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull;
}
__device__ __forceinline__ bool isNanF16(uint16_t bits) { return (bits & 0x7FFFu) > 0x7C00u; }
__device__ __forceinline__ bool isNanBf16(uint16_t bits) { return (bits & 0x7FFFu) > 0x7F80u; }

/// fp16 -> fp32. Exact for every non-NaN input with either codec; a NaN
/// stays a NaN (its bits differ between codecs, and no kernel writes them).
template <HalfCodec kCodec>
__device__ __forceinline__ float widenHalf(uint16_t h) {
  if constexpr (kCodec == HalfCodec::kHardware) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  } else {
    return half::halfToFloat(h);
  }
}

/// fp32 -> fp16, round to nearest even, for a value the caller has checked
/// is not NaN (cvt.rn.f16.f32 would give 0x7FFF for one).
template <HalfCodec kCodec>
__device__ __forceinline__ uint16_t narrowHalfNotNan(float f) {
  if constexpr (kCodec == HalfCodec::kHardware) {
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
  } else {
    return half::floatToHalf(f);
  }
}

/// fp32 -> fp16 with the kernels' NaN rule: any NaN gives the canonical 0x7E00.
template <HalfCodec kCodec>
__device__ __forceinline__ uint16_t narrowHalf(float f) {
  return isNanF32(__float_as_uint(f)) ? kNanF16 : narrowHalfNotNan<kCodec>(f);
}

/// fp32 -> bf16 with the kernels' NaN rule: any NaN gives the canonical 0x7FC0.
__device__ __forceinline__ uint16_t narrowBf16(float f) {
  const uint32_t bits = __float_as_uint(f);
  return isNanF32(bits) ? kNanBf16 : half::floatBitsToBf16(bits);
}

// ---- operators --------------------------------------------------------------

/// a op b on raw bits.
template <coilDataType_t kType, Op kOp, HalfCodec kCodec>
struct ReduceOp {
  using Raw = typename Traits<kType>::Raw;
  static constexpr int kInputs = 2;
  static constexpr Kind kKind = Traits<kType>::kKind;

  __device__ __forceinline__ Raw operator()(Raw a, Raw b) const {
    if constexpr (kKind == Kind::kSigned || kKind == Kind::kUnsigned) {
      if constexpr (kOp == Op::kSum || kOp == Op::kProd) {
        // Wrap: unsigned arithmetic, at least as wide as unsigned int (so
        // 8-bit values do not promote to signed int), truncated back.
        using W = std::conditional_t<(sizeof(Raw) < sizeof(unsigned)), unsigned, Raw>;
        const W x = a, y = b;
        return static_cast<Raw>(kOp == Op::kSum ? x + y : x * y);
      } else if constexpr (kOp == Op::kBand) {
        return static_cast<Raw>(a & b);
      } else if constexpr (kOp == Op::kBor) {
        return static_cast<Raw>(a | b);
      } else if constexpr (kOp == Op::kBxor) {
        return static_cast<Raw>(a ^ b);
      } else {
        using Int = typename Traits<kType>::Int;
        const Int x = static_cast<Int>(a), y = static_cast<Int>(b);
        const bool takeA = kOp == Op::kMax ? x > y : x < y;
        return takeA ? a : b;
      }
    } else if constexpr (kKind == Kind::kFloat) {
      const float x = __uint_as_float(a), y = __uint_as_float(b);
      if constexpr (kOp == Op::kSum || kOp == Op::kProd) {
        const uint32_t r = __float_as_uint(kOp == Op::kSum ? __fadd_rn(x, y) : __fmul_rn(x, y));
        return isNanF32(r) ? kNanF32 : r;
      } else {
        if (isNanF32(a) || isNanF32(b)) return kNanF32;
        const bool takeA = kOp == Op::kMax ? x > y : x < y;
        return takeA ? a : b;
      }
    } else if constexpr (kKind == Kind::kDouble) {
      const double x = __longlong_as_double(static_cast<long long>(a));
      const double y = __longlong_as_double(static_cast<long long>(b));
      if constexpr (kOp == Op::kSum || kOp == Op::kProd) {
        const uint64_t r = static_cast<uint64_t>(
            __double_as_longlong(kOp == Op::kSum ? __dadd_rn(x, y) : __dmul_rn(x, y)));
        return isNanF64(r) ? kNanF64 : r;
      } else {
        if (isNanF64(a) || isNanF64(b)) return kNanF64;
        const bool takeA = kOp == Op::kMax ? x > y : x < y;
        return takeA ? a : b;
      }
    } else {  // fp16, bf16: widen (exactly), compute in fp32, round once
      constexpr bool kHalf = kKind == Kind::kHalf;
      const float x = kHalf ? widenHalf<kCodec>(a) : half::bf16ToFloat(a);
      const float y = kHalf ? widenHalf<kCodec>(b) : half::bf16ToFloat(b);
      if constexpr (kOp == Op::kSum || kOp == Op::kProd) {
        const float r = kOp == Op::kSum ? __fadd_rn(x, y) : __fmul_rn(x, y);
        return kHalf ? narrowHalf<kCodec>(r) : narrowBf16(r);
      } else {
        // narrow(widen(v)) == v for every non-NaN v, so the selected
        // operand's own bits are the rounded result.
        if (kHalf ? (isNanF16(a) || isNanF16(b)) : (isNanBf16(a) || isNanBf16(b)))
          return kHalf ? kNanF16 : kNanBf16;
        const bool takeA = kOp == Op::kMax ? x > y : x < y;
        return takeA ? a : b;
      }
    }
  }
};

/// a / divisor on raw bits (the second operand is unused).
template <coilDataType_t kType, HalfCodec kCodec>
struct DivideOp {
  using Raw = typename Traits<kType>::Raw;
  static constexpr int kInputs = 1;
  static constexpr Kind kKind = Traits<kType>::kKind;

  // The divisor converted on the host exactly as the CPU kernel converts it.
  int64_t sdiv;
  uint64_t udiv;
  float fdiv;
  double ddiv;

  __device__ __forceinline__ Raw operator()(Raw a, Raw) const {
    if constexpr (kKind == Kind::kSigned) {
      using Int = typename Traits<kType>::Int;
      const int64_t q = static_cast<int64_t>(static_cast<Int>(a)) / sdiv;
      return static_cast<Raw>(static_cast<Int>(q));
    } else if constexpr (kKind == Kind::kUnsigned) {
      return static_cast<Raw>(static_cast<uint64_t>(a) / udiv);
    } else if constexpr (kKind == Kind::kFloat) {
      const uint32_t r = __float_as_uint(__fdiv_rn(__uint_as_float(a), fdiv));
      return isNanF32(r) ? kNanF32 : r;
    } else if constexpr (kKind == Kind::kDouble) {
      const uint64_t r = static_cast<uint64_t>(__double_as_longlong(
          __ddiv_rn(__longlong_as_double(static_cast<long long>(a)), ddiv)));
      return isNanF64(r) ? kNanF64 : r;
    } else if constexpr (kKind == Kind::kHalf) {
      return narrowHalf<kCodec>(__fdiv_rn(widenHalf<kCodec>(a), fdiv));
    } else {
      return narrowBf16(__fdiv_rn(half::bf16ToFloat(a), fdiv));
    }
  }
};

// ---- memory access ------------------------------------------------------------

/// One element at `p`: an element-sized access when aligned, else bytes.
template <class Raw>
__device__ __forceinline__ Raw loadElement(const unsigned char* p, bool aligned) {
  if (aligned) return *reinterpret_cast<const Raw*>(p);
  uint64_t v = 0;
#pragma unroll
  for (int k = 0; k < static_cast<int>(sizeof(Raw)); ++k) v |= static_cast<uint64_t>(p[k]) << (8 * k);
  return static_cast<Raw>(v);
}

template <class Raw>
__device__ __forceinline__ void storeElement(unsigned char* p, Raw value, bool aligned) {
  if (aligned) {
    *reinterpret_cast<Raw*>(p) = value;
    return;
  }
  const uint64_t v = value;
#pragma unroll
  for (int k = 0; k < static_cast<int>(sizeof(Raw)); ++k) p[k] = static_cast<unsigned char>(v >> (8 * k));
}

/// A 16-byte vector as kCount elements (little-endian, element 0 lowest).
template <class Raw>
struct Pack {
  static constexpr int kCount = 16 / static_cast<int>(sizeof(Raw));

  __device__ __forceinline__ static void unpack(const uint4& v, Raw (&e)[kCount]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    if constexpr (sizeof(Raw) == 8) {
#pragma unroll
      for (int k = 0; k < kCount; ++k)
        e[k] = static_cast<Raw>(static_cast<uint64_t>(w[2 * k]) | (static_cast<uint64_t>(w[2 * k + 1]) << 32));
    } else {
      constexpr int kPerWord = 4 / static_cast<int>(sizeof(Raw));
#pragma unroll
      for (int k = 0; k < kCount; ++k)
        e[k] = static_cast<Raw>(w[k / kPerWord] >> (8 * sizeof(Raw) * (k % kPerWord)));
    }
  }

  __device__ __forceinline__ static uint4 pack(const Raw (&e)[kCount]) {
    uint32_t w[4] = {0, 0, 0, 0};
    if constexpr (sizeof(Raw) == 8) {
#pragma unroll
      for (int k = 0; k < kCount; ++k) {
        w[2 * k] = static_cast<uint32_t>(static_cast<uint64_t>(e[k]));
        w[2 * k + 1] = static_cast<uint32_t>(static_cast<uint64_t>(e[k]) >> 32);
      }
    } else {
      constexpr int kPerWord = 4 / static_cast<int>(sizeof(Raw));
#pragma unroll
      for (int k = 0; k < kCount; ++k)
        w[k / kPerWord] |= static_cast<uint32_t>(e[k]) << (8 * sizeof(Raw) * (k % kPerWord));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};

template <class Fn>
__device__ __forceinline__ uint4 applyVector(const Fn& fn, const uint4& va, const uint4& vb) {
  using Raw = typename Fn::Raw;
  using P = Pack<Raw>;
  Raw x[P::kCount], y[P::kCount], r[P::kCount];
  P::unpack(va, x);
  P::unpack(vb, y);
#pragma unroll
  for (int k = 0; k < P::kCount; ++k) r[k] = fn(x[k], y[k]);
  return P::pack(r);
}

// ---- the kernel ------------------------------------------------------------------

/// A grid-stride kernel's place in its layout (Layout on the host): this
/// thread, the grid's threads, and the elements outside the vector body
/// ([0, head) and [bodyEnd, count)), numbered 0 .. scalars - 1.
struct GridStride {
  size_t tid, nthreads, bodyEnd, scalars;
  __device__ GridStride(size_t head, size_t nvec, size_t count, size_t perVector)
      : tid(static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x),
        nthreads(static_cast<size_t>(gridDim.x) * blockDim.x),
        bodyEnd(head + nvec * perVector),
        scalars(head + (count - bodyEnd)) {}
  /// The element index of scalar s.
  __device__ size_t scalarOffset(size_t s, size_t head) const {
    return s < head ? s : bodyEnd + (s - head);
  }
};

/// Elements [0, head) and [head + nvec*kCount, count) one by one (byte
/// accesses unless elemAligned); elements in between as nvec 16-byte
/// vectors starting at byte head*sizeof(Raw), which the host has checked is
/// 16-byte aligned in every pointer. With one input, b is unused.
template <class Fn>
__global__ void __launch_bounds__(kThreads)
    elementwiseKernel(unsigned char* dst, const unsigned char* a, const unsigned char* b, size_t head,
                      size_t nvec, size_t count, bool elemAligned, Fn fn) {
  using Raw = typename Fn::Raw;
  constexpr size_t kSize = sizeof(Raw);
  const GridStride g(head, nvec, count, Pack<Raw>::kCount);
  const size_t tid = g.tid, nthreads = g.nthreads;
  for (size_t s = tid; s < g.scalars; s += nthreads) {
    const size_t offset = g.scalarOffset(s, head) * kSize;
    const Raw x = loadElement<Raw>(a + offset, elemAligned);
    Raw y = 0;
    if constexpr (Fn::kInputs == 2) y = loadElement<Raw>(b + offset, elemAligned);
    storeElement<Raw>(dst + offset, fn(x, y), elemAligned);
  }

  if (nvec == 0) return;
  const uint4* va = reinterpret_cast<const uint4*>(a + head * kSize);
  const uint4* vb = reinterpret_cast<const uint4*>(b + head * kSize);
  uint4* vd = reinterpret_cast<uint4*>(dst + head * kSize);
  for (size_t v = tid; v < nvec; v += nthreads * kUnroll) {
    uint4 xa[kUnroll], xb[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t j = v + u * nthreads;
      if (j < nvec) {
        xa[u] = va[j];
        if constexpr (Fn::kInputs == 2) xb[u] = vb[j];
        else xb[u] = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t j = v + u * nthreads;
      if (j < nvec) vd[j] = applyVector(fn, xa[u], xb[u]);
    }
  }
}

/// The sources of one chain launch (kernel parameters: no device array).
struct ChainSources {
  const unsigned char* p[kChainSourcesPerLaunch];
  int n;  // 2 .. kChainSourcesPerLaunch
};

/// dst = ((p0 op p1) op p2) ... in one pass: the layout of elementwiseKernel
/// (scalar head and tail, 16-byte vectors between, checked by the host for
/// every pointer). Source indices are compile-time (unrolled, guarded by
/// n), so the pointers stay in the parameter bank.
template <class Fn>
__global__ void __launch_bounds__(kThreads)
    chainKernel(unsigned char* dst, ChainSources src, size_t head, size_t nvec, size_t count,
                bool elemAligned, Fn fn) {
  using Raw = typename Fn::Raw;
  constexpr size_t kSize = sizeof(Raw);
  const GridStride g(head, nvec, count, Pack<Raw>::kCount);
  const size_t tid = g.tid, nthreads = g.nthreads;
  for (size_t s = tid; s < g.scalars; s += nthreads) {
    const size_t offset = g.scalarOffset(s, head) * kSize;
    Raw acc = loadElement<Raw>(src.p[0] + offset, elemAligned);
#pragma unroll
    for (int q = 1; q < kChainSourcesPerLaunch; ++q)
      if (q < src.n) acc = fn(acc, loadElement<Raw>(src.p[q] + offset, elemAligned));
    storeElement<Raw>(dst + offset, acc, elemAligned);
  }

  if (nvec == 0) return;
  uint4* vd = reinterpret_cast<uint4*>(dst + head * kSize);
  for (size_t v = tid; v < nvec; v += nthreads * kUnroll) {
    uint4 acc[kUnroll];
    const uint4* v0 = reinterpret_cast<const uint4*>(src.p[0] + head * kSize);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t j = v + u * nthreads;
      acc[u] = j < nvec ? v0[j] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int q = 1; q < kChainSourcesPerLaunch; ++q) {
      if (q >= src.n) break;
      const uint4* vq = reinterpret_cast<const uint4*>(src.p[q] + head * kSize);
      uint4 x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t j = v + u * nthreads;
        x[u] = j < nvec ? vq[j] : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc[u] = applyVector(fn, acc[u], x[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t j = v + u * nthreads;
      if (j < nvec) vd[j] = acc[u];
    }
  }
}

/// Test hook kernels: widen / narrow with a codec.
template <coilDataType_t kType, HalfCodec kCodec>
__global__ void __launch_bounds__(kThreads) widenKernel(uint32_t* dst, const uint16_t* src, size_t count) {
  const size_t nthreads = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += nthreads) {
    if constexpr (kType == coilFloat16) dst[i] = __float_as_uint(widenHalf<kCodec>(src[i]));
    else dst[i] = half::bf16ToFloatBits(src[i]);
  }
}

template <coilDataType_t kType, HalfCodec kCodec>
__global__ void __launch_bounds__(kThreads) narrowKernel(uint16_t* dst, const uint32_t* src, size_t count) {
  const size_t nthreads = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += nthreads) {
    const uint32_t bits = src[i];
    if constexpr (kType == coilFloat16) {
      // The software codec is half.h's full conversion (NaN payloads kept);
      // the hardware one is what the kernels do (NaN -> 0x7E00).
      if constexpr (kCodec == HalfCodec::kSoftware) dst[i] = half::floatBitsToHalf(bits);
      else dst[i] = narrowHalf<kCodec>(__uint_as_float(bits));
    } else {
      dst[i] = half::floatBitsToBf16(bits);
    }
  }
}

// ---- host side ---------------------------------------------------------------------

[[noreturn]] void failCuda(const char* what, cudaError_t err) {
  fail(coilUnhandledCudaError, what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

void checkCuda(const char* what, cudaError_t err) {
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // a launch error would also linger as the "last error"
    failCuda(what, err);
  }
}

bool validType(coilDataType_t type) {
  return static_cast<int>(type) >= 0 && static_cast<int>(type) < coilNumTypes;
}

void checkType(coilDataType_t type, const char* what) {
  if (!validType(type))
    fail(coilInvalidArgument, what, ": invalid datatype ", static_cast<int>(type), " (valid: 0..",
         coilNumTypes - 1, ")");
}

void checkOp(coilRedOp_t op, coilDataType_t type, const char* what) {
  if (static_cast<int>(op) < 0 || static_cast<int>(op) >= coilNumOps)
    fail(coilInvalidArgument, what, ": invalid reduction op ", static_cast<int>(op), " (valid: 0..",
         coilNumOps - 1, ")");
  reduce::checkTakesType(op, type, what);
}

void checkDivisor(int divisor, const char* what) {
  if (divisor < 1) fail(coilInvalidArgument, what, ": divisor must be >= 1, got ", divisor);
}

void checkCodec(HalfCodec codec, const char* what) {
  if (codec != HalfCodec::kHardware && codec != HalfCodec::kSoftware)
    fail(coilInvalidArgument, what, ": invalid fp16 codec ", static_cast<int>(codec));
}

/// Streaming multiprocessors of the current device (cached per device).
size_t smCount(const char* what) {
  constexpr int kCached = 64;
  static std::atomic<int> cache[kCached];  // 0: not asked yet
  int device = 0;
  checkCuda(what, cudaGetDevice(&device));
  const bool cached = device >= 0 && device < kCached;
  int sms = cached ? cache[device].load(std::memory_order_relaxed) : 0;
  if (sms == 0) {
    checkCuda(what, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (sms < 1) sms = 1;
    if (cached) cache[device].store(sms, std::memory_order_relaxed);
  }
  return static_cast<size_t>(sms);
}

/// The most blocks of kKernel that are resident at once (one full wave):
/// the grid-stride loops never need more. The per-SM occupancy is cached per
/// kernel (it depends on the kernel's registers and the GPU's architecture;
/// a process mixing architectures at worst sizes a grid suboptimally).
template <auto kKernel>
size_t gridLimit(const char* what) {
  static std::atomic<int> perSm{0};
  int blocks = perSm.load(std::memory_order_relaxed);
  if (blocks == 0) {
    checkCuda(what, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, kThreads, 0));
    if (blocks < 1) blocks = 1;
    if (blocks > kMaxBlocksPerSm) blocks = kMaxBlocksPerSm;
    perSm.store(blocks, std::memory_order_relaxed);
  }
  return smCount(what) * static_cast<size_t>(blocks);
}

/// Where a launch's parts lie: elements [0, head) and after the body one by
/// one, nvec 16-byte vectors between. Vectors only when every pointer is
/// element-aligned and as misaligned modulo 16 as the first one.
struct Layout {
  size_t head = 0, nvec = 0;
  bool elemAligned = false;
};

Layout layoutOf(size_t elementSize, size_t perVector, const uintptr_t* pointers, int n,
                size_t count) {
  const size_t misalign = pointers[0] % 16;
  bool sameMisalign = true;
  Layout l{count, 0, true};
  for (int i = 0; i < n; ++i) {
    l.elemAligned = l.elemAligned && pointers[i] % elementSize == 0;
    sameMisalign = sameMisalign && pointers[i] % 16 == misalign;
  }
  if (l.elemAligned && sameMisalign) {
    l.head = ((16 - misalign) % 16) / elementSize;
    if (l.head > count) l.head = count;
    l.nvec = (count - l.head) / perVector;
  }
  return l;
}

/// A grid-stride kernel's launch over `l`: threads for the larger of its
/// vector and scalar parts, at most `limit` blocks (one resident wave).
cudaLaunchConfig_t configFor(const Layout& l, size_t count, size_t perVector, size_t limit,
                             void* stream) {
  const size_t scalars = count - l.nvec * perVector;
  const size_t vectorThreads = (l.nvec + kUnroll - 1) / kUnroll;
  const size_t threadsWanted = vectorThreads > scalars ? vectorThreads : scalars;
  size_t blocks = (threadsWanted + kThreads - 1) / kThreads;
  if (blocks > limit) blocks = limit;
  if (blocks < 1) blocks = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(kThreads);
  config.stream = static_cast<cudaStream_t>(stream);
  return config;
}

template <class Fn>
void launch(const char* what, const Fn& fn, void* dst, const void* a, const void* b, size_t count,
            void* stream) {
  using Raw = typename Fn::Raw;
  constexpr size_t kCount = Pack<Raw>::kCount;
  if (count == 0) return;
  if (Fn::kInputs == 1) b = a;
  const uintptr_t pointers[3] = {reinterpret_cast<uintptr_t>(a), reinterpret_cast<uintptr_t>(dst),
                                 reinterpret_cast<uintptr_t>(b)};
  const Layout l = layoutOf(sizeof(Raw), kCount, pointers, 3, count);
  cudaLaunchConfig_t config =
      configFor(l, count, kCount, gridLimit<&elementwiseKernel<Fn>>(what), stream);
  checkCuda(what, cudaLaunchKernelEx(&config, &elementwiseKernel<Fn>, static_cast<unsigned char*>(dst),
                                     static_cast<const unsigned char*>(a),
                                     static_cast<const unsigned char*>(b), l.head, l.nvec, count,
                                     l.elemAligned, fn));
}

/// One chain launch: dst = src.p[0] op ... op src.p[src.n - 1].
template <class Fn>
void launchChain(const char* what, const Fn& fn, void* dst, const ChainSources& src, size_t count,
                 void* stream) {
  using Raw = typename Fn::Raw;
  constexpr size_t kCount = Pack<Raw>::kCount;
  uintptr_t pointers[kChainSourcesPerLaunch + 1];
  for (int q = 0; q < src.n; ++q) pointers[q] = reinterpret_cast<uintptr_t>(src.p[q]);
  pointers[src.n] = reinterpret_cast<uintptr_t>(dst);
  const Layout l = layoutOf(sizeof(Raw), kCount, pointers, src.n + 1, count);
  cudaLaunchConfig_t config = configFor(l, count, kCount, gridLimit<&chainKernel<Fn>>(what), stream);
  checkCuda(what, cudaLaunchKernelEx(&config, &chainKernel<Fn>, static_cast<unsigned char*>(dst), src,
                                     l.head, l.nvec, count, l.elemAligned, fn));
}

/// The whole chain: the first launch reads up to kChainSourcesPerLaunch
/// sources, each later one continues from dst (dst op the next ones).
template <class Fn>
void chain(const char* what, const Fn& fn, void* dst, const void* const* src, int n, size_t count,
           void* stream) {
  if (count == 0) return;
  ChainSources batch{};
  int next = 0;
  while (next < n) {
    batch.n = 0;
    if (next > 0) batch.p[batch.n++] = static_cast<const unsigned char*>(dst);
    while (batch.n < kChainSourcesPerLaunch && next < n)
      batch.p[batch.n++] = static_cast<const unsigned char*>(src[next++]);
    launchChain(what, fn, dst, batch, count, stream);
  }
}

/// Calls body(fn) with the ReduceOp functor of `op` (coilAvg sums; the
/// division that finishes it is divideAsync's).
/// The bitwise ops exist for the integer types only (checkOp refused the
/// others before any launch).
template <coilDataType_t kType, HalfCodec kCodec, class Body>
void withReduceOp(coilRedOp_t op, const char* what, const Body& body) {
  constexpr Kind kKind = Traits<kType>::kKind;
  switch (op) {
    case coilSum:
    case coilAvg: return body(ReduceOp<kType, Op::kSum, kCodec>{});
    case coilProd: return body(ReduceOp<kType, Op::kProd, kCodec>{});
    case coilMax: return body(ReduceOp<kType, Op::kMax, kCodec>{});
    case coilMin: return body(ReduceOp<kType, Op::kMin, kCodec>{});
    default:
      if constexpr (kKind == Kind::kSigned || kKind == Kind::kUnsigned) {
        if (op == coilBand) return body(ReduceOp<kType, Op::kBand, kCodec>{});
        if (op == coilBor) return body(ReduceOp<kType, Op::kBor, kCodec>{});
        if (op == coilBxor) return body(ReduceOp<kType, Op::kBxor, kCodec>{});
      }
      checkOp(op, kType, what);  // throws
  }
}

template <coilDataType_t kType, HalfCodec kCodec>
void reduceChainTyped(void* dst, const void* const* src, int n, size_t count, coilRedOp_t op,
                      void* stream) {
  constexpr const char* kWhat = "reduceChainAsync";
  withReduceOp<kType, kCodec>(op, kWhat, [&](const auto& fn) {
    chain(kWhat, fn, dst, src, n, count, stream);
  });
}

template <coilDataType_t kType, HalfCodec kCodec>
void reduceTyped(void* dst, const void* a, const void* b, size_t count, coilRedOp_t op, void* stream) {
  constexpr const char* kWhat = "reduceAsync";
  withReduceOp<kType, kCodec>(op, kWhat, [&](const auto& fn) {
    launch(kWhat, fn, dst, a, b, count, stream);
  });
}

template <coilDataType_t kType, HalfCodec kCodec>
void divideTyped(void* dst, const void* src, size_t count, int divisor, void* stream) {
  DivideOp<kType, kCodec> fn{};
  fn.sdiv = static_cast<int64_t>(divisor);
  fn.udiv = static_cast<uint64_t>(divisor);
  fn.fdiv = static_cast<float>(divisor);
  fn.ddiv = static_cast<double>(divisor);
  launch("divideAsync", fn, dst, src, nullptr, count, stream);
}

/// Calls body.template operator()<kType, codec>() for the runtime type, with
/// the fp16 codec only distinguished for fp16 (other types get one copy).
template <class Body>
void dispatch(coilDataType_t type, HalfCodec codec, const Body& body) {
  constexpr HalfCodec kHw = HalfCodec::kHardware;
  switch (type) {
    case coilInt8: return body.template operator()<coilInt8, kHw>();
    case coilUint8: return body.template operator()<coilUint8, kHw>();
    case coilInt32: return body.template operator()<coilInt32, kHw>();
    case coilUint32: return body.template operator()<coilUint32, kHw>();
    case coilInt64: return body.template operator()<coilInt64, kHw>();
    case coilUint64: return body.template operator()<coilUint64, kHw>();
    case coilFloat16:
      if (codec == HalfCodec::kSoftware) return body.template operator()<coilFloat16, HalfCodec::kSoftware>();
      return body.template operator()<coilFloat16, kHw>();
    case coilFloat32: return body.template operator()<coilFloat32, kHw>();
    case coilFloat64: return body.template operator()<coilFloat64, kHw>();
    case coilBfloat16: return body.template operator()<coilBfloat16, kHw>();
    default: break;
  }
  fail(coilInvalidArgument, "invalid datatype ", static_cast<int>(type));  // callers check first
}

/// Loads into the current device's context the kernels of one type's
/// reductions (every op it has) and its division: asking for a kernel's
/// attributes loads it (CUDA 12.2+ loads kernels lazily, at first use).
template <coilDataType_t kType, HalfCodec kCodec>
void loadTyped(const char* what) {
  constexpr Kind kKind = Traits<kType>::kKind;
  constexpr bool kBitwise = kKind == Kind::kSigned || kKind == Kind::kUnsigned;
  const coilRedOp_t ops[] = {coilSum, coilProd, coilMax, coilMin, coilBand, coilBor, coilBxor};
  cudaFuncAttributes attributes{};
  for (const coilRedOp_t op : ops) {
    if (!kBitwise && (op == coilBand || op == coilBor || op == coilBxor)) continue;
    withReduceOp<kType, kCodec>(op, what, [&](const auto& fn) {
      using Fn = std::decay_t<decltype(fn)>;
      checkCuda(what, cudaFuncGetAttributes(&attributes, &elementwiseKernel<Fn>));
      checkCuda(what, cudaFuncGetAttributes(&attributes, &chainKernel<Fn>));
    });
  }
  checkCuda(what, cudaFuncGetAttributes(&attributes, &elementwiseKernel<DivideOp<kType, kCodec>>));
}

template <coilDataType_t kType, HalfCodec kCodec>
void launchConvert(bool widen, void* dst, const void* src, size_t count, void* stream) {
  const char* what = widen ? "widenAsync" : "narrowAsync";
  if (count == 0) return;
  size_t blocks = (count + kThreads - 1) / kThreads;
  const size_t limit = widen ? gridLimit<&widenKernel<kType, kCodec>>(what)
                             : gridLimit<&narrowKernel<kType, kCodec>>(what);
  if (blocks > limit) blocks = limit;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(kThreads);
  config.stream = static_cast<cudaStream_t>(stream);
  if (widen)
    checkCuda(what, cudaLaunchKernelEx(&config, &widenKernel<kType, kCodec>, static_cast<uint32_t*>(dst),
                                       static_cast<const uint16_t*>(src), count));
  else
    checkCuda(what, cudaLaunchKernelEx(&config, &narrowKernel<kType, kCodec>, static_cast<uint16_t*>(dst),
                                       static_cast<const uint32_t*>(src), count));
}

void convert(HalfCodec codec, bool widen, void* dst, const void* src, size_t count,
             coilDataType_t type, void* stream) {
  const char* what = widen ? "widenAsync" : "narrowAsync";
  checkCodec(codec, what);
  if (type == coilBfloat16) return launchConvert<coilBfloat16, HalfCodec::kSoftware>(widen, dst, src, count, stream);
  if (type != coilFloat16)
    fail(coilInvalidArgument, what, ": datatype ", static_cast<int>(type), " is not float16 or bfloat16");
  if (codec == HalfCodec::kSoftware)
    return launchConvert<coilFloat16, HalfCodec::kSoftware>(widen, dst, src, count, stream);
  launchConvert<coilFloat16, HalfCodec::kHardware>(widen, dst, src, count, stream);
}

}  // namespace

void reduceAsync(void* dst, const void* a, const void* b, size_t count, coilDataType_t type,
                 coilRedOp_t op, void* stream) {
  testing::reduceAsyncWith(kDefaultHalfCodec, dst, a, b, count, type, op, stream);
}

void reduceChainAsync(void* dst, const void* const* src, int n, size_t count, coilDataType_t type,
                      coilRedOp_t op, void* stream) {
  testing::reduceChainAsyncWith(kDefaultHalfCodec, dst, src, n, count, type, op, stream);
}

void divideAsync(void* dst, const void* src, size_t count, coilDataType_t type, int divisor,
                 void* stream) {
  testing::divideAsyncWith(kDefaultHalfCodec, dst, src, count, type, divisor, stream);
}

void loadReductionKernels() {
  // Once per device and process: later communicators find them loaded (and
  // a device that cannot load them has said so once).
  static std::mutex mutex;
  static std::set<int> tried;
  int device = 0;
  checkCuda("loadReductionKernels", cudaGetDevice(&device));
  {
    std::lock_guard lock(mutex);
    if (!tried.insert(device).second) return;
  }
  for (const coilDataType_t type : {coilInt8, coilUint8, coilInt32, coilUint32, coilInt64, coilUint64,
                                    coilFloat16, coilFloat32, coilFloat64, coilBfloat16})
    dispatch(type, kDefaultHalfCodec, [&]<coilDataType_t kType, HalfCodec kCodec>() {
      loadTyped<kType, kCodec>("loadReductionKernels");
    });
}

namespace testing {

HalfCodec defaultHalfCodec() { return kDefaultHalfCodec; }

void reduceAsyncWith(HalfCodec codec, void* dst, const void* a, const void* b, size_t count,
                     coilDataType_t type, coilRedOp_t op, void* stream) {
  checkType(type, "reduceAsync");
  checkOp(op, type, "reduceAsync");
  checkCodec(codec, "reduceAsync");
  dispatch(type, codec, [&]<coilDataType_t kType, HalfCodec kCodec>() {
    reduceTyped<kType, kCodec>(dst, a, b, count, op, stream);
  });
}

void reduceChainAsyncWith(HalfCodec codec, void* dst, const void* const* src, int n, size_t count,
                          coilDataType_t type, coilRedOp_t op, void* stream) {
  constexpr const char* kWhat = "reduceChainAsync";
  checkType(type, kWhat);
  checkOp(op, type, kWhat);
  checkCodec(codec, kWhat);
  checkChainArguments(dst, src, n, kWhat);
  dispatch(type, codec, [&]<coilDataType_t kType, HalfCodec kCodec>() {
    reduceChainTyped<kType, kCodec>(dst, src, n, count, op, stream);
  });
}

void divideAsyncWith(HalfCodec codec, void* dst, const void* src, size_t count,
                     coilDataType_t type, int divisor, void* stream) {
  checkType(type, "divideAsync");
  checkDivisor(divisor, "divideAsync");
  checkCodec(codec, "divideAsync");
  dispatch(type, codec, [&]<coilDataType_t kType, HalfCodec kCodec>() {
    divideTyped<kType, kCodec>(dst, src, count, divisor, stream);
  });
}

void widenAsync(HalfCodec codec, uint32_t* dst, const uint16_t* src, size_t count,
                coilDataType_t type, void* stream) {
  convert(codec, true, dst, src, count, type, stream);
}

void narrowAsync(HalfCodec codec, uint16_t* dst, const uint32_t* src, size_t count,
                 coilDataType_t type, void* stream) {
  convert(codec, false, dst, src, count, type, stream);
}

}  // namespace testing

}  // namespace coil::device
