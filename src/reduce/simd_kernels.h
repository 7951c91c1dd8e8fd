// The one kernel template of the SIMD ISAs, written with GCC/Clang vector
// extensions so the same source becomes AVX2 or AVX-512 code depending on
// the flags of the translation unit that instantiates it.
//
// Included only by kernels_avx2.cc and kernels_avx512.cc. An ISA supplies
//   struct Isa {
//     static constexpr size_t kVectorBytes;          // 32 or 64
//     static FloatVec loadHalf(const void* p);       // kVectorBytes/2 bytes of fp16
//     static void storeHalf(void* p, FloatVec v);    // round to nearest even
//     static Mask unordered(V a, V b);               // lanes where a or b is NaN
//     static bool any(Mask m);                       //   (V: float or double vector)
//   };
// fp16 needs the F16C / AVX-512F conversion instructions and the NaN test
// wants the two-operand unordered compare, which vector extensions cannot
// express; everything else, bf16 included, is plain vector arithmetic.
//
// Why everything here is a member of a class template parameterized by Isa:
// each ISA's Isa struct lives in an anonymous namespace, so every function
// instantiated from this header has internal linkage. Were any of it an
// ordinary inline function or a template over plain types, the AVX2 and
// AVX-512 units (and generic code) could each emit a weak copy and the
// linker would keep one of them for all callers, possibly an AVX-512 copy
// called on a CPU without AVX-512. For the same reason this header calls no
// library templates (only compiler builtins).
//
// Semantics (the generic kernels implement the same, scalar):
//   integers  sum/prod wrap (computed in the unsigned type), max/min compare,
//             band/bor/bxor are bitwise (integers only).
//   floats    IEEE add/mul in the element precision (fp16/bf16: in fp32,
//             then one round-to-nearest-even back).
//   max/min   a > b ? a : b (min: <), so equal inputs (+0/-0) give b.
//   NaN       every float op whose result is NaN (a NaN input, Inf-Inf,
//             0*Inf, max/min with a NaN) writes the canonical quiet NaN
//             (+, payload 0: fp32 0x7FC00000, fp64 0x7FF8000000000000,
//             fp16 0x7E00, bf16 0x7FC0). Which NaN's payload x86 keeps
//             depends on operand order, which the compiler may swap for a
//             commutative a+b; canonical NaNs make every ISA, every
//             compiler, and every rank of a collective write the same bits.
//   tails     the last partial block is copied into zeroed stack buffers
//             and goes through the same vector code, so a count of 1 and
//             the end of a long array round exactly alike.
//
// Speed: fp16/bf16 sums are bound by conversion work, not memory, so the
// NaN fix-up of sum/prod is one unordered compare per pair of result
// vectors and a single branch per unrolled group; the per-lane blend runs
// only when a group really holds a NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "reduce/kernel_table.h"

namespace coil::reduce::simd {

/// GCC/Clang vector of `kBytes` bytes of T.
template <class T, size_t kBytes>
struct VecOf {
  typedef T type __attribute__((vector_size(kBytes)));
};

/// How one block of storage type T is loaded into kParts compute vectors
/// and stored back. Default: T is its own compute type, one vector a block.
template <class Isa, class T>
struct Lanes {
  using Compute = T;
  using V = typename VecOf<T, Isa::kVectorBytes>::type;
  static constexpr size_t kParts = 1;
  static constexpr size_t kCount = Isa::kVectorBytes / sizeof(T);  // elements per block
  static void load(const void* p, V* parts) {
    V v;
    __builtin_memcpy(&v, p, sizeof v);
    parts[0] = v;
  }
  static void store(void* p, const V* parts) { __builtin_memcpy(p, &parts[0], sizeof(V)); }
};

/// fp16: half a vector of storage widens to one fp32 vector (ISA instructions).
template <class Isa>
struct Lanes<Isa, Float16> {
  using Compute = float;
  using V = typename VecOf<float, Isa::kVectorBytes>::type;
  static constexpr size_t kParts = 1;
  static constexpr size_t kCount = Isa::kVectorBytes / sizeof(float);
  static void load(const void* p, V* parts) { parts[0] = Isa::loadHalf(p); }
  static void store(void* p, const V* parts) { Isa::storeHalf(p, parts[0]); }
};

/// bf16: one full vector of storage is two fp32 vectors, the even elements
/// (shifted up) and the odd ones (low half masked off): two cheap integer
/// ops instead of widening shuffles. Narrowing rounds to nearest even by
/// integer arithmetic, (bits + 0x7FFF + lsb) >> 16, and merges the halves
/// back. Precondition: the only NaN stored is the canonical 0x7FC00000
/// (the kernels below guarantee it), which rounds to 0x7FC0; any other
/// NaN could carry into the exponent and come out as Inf.
template <class Isa>
struct Lanes<Isa, BFloat16> {
  using Compute = float;
  using V = typename VecOf<float, Isa::kVectorBytes>::type;
  using Bits = typename VecOf<uint32_t, Isa::kVectorBytes>::type;
  static constexpr size_t kParts = 2;
  static constexpr size_t kCount = Isa::kVectorBytes / sizeof(BFloat16);
  static void load(const void* p, V* parts) {
    Bits pairs;
    __builtin_memcpy(&pairs, p, sizeof pairs);
    parts[0] = reinterpret_cast<V>(pairs << 16);           // even elements
    parts[1] = reinterpret_cast<V>(pairs & 0xFFFF0000u);   // odd elements
  }
  static Bits roundToNearestEven(V v) {
    const Bits bits = reinterpret_cast<Bits>(v);
    return bits + 0x7FFFu + ((bits >> 16) & 1u);
  }
  static void store(void* p, const V* parts) {
    const Bits pairs = (roundToNearestEven(parts[0]) >> 16) | (roundToNearestEven(parts[1]) & 0xFFFF0000u);
    __builtin_memcpy(p, &pairs, sizeof pairs);
  }
};

/// The kernels of one SIMD ISA; makeTable<SimdKernels<Isa>>() is its table.
template <class Isa>
struct SimdKernels {
  /// +qNaN with a zero payload: 0x7FC00000 / 0x7FF8000000000000.
  template <class C>
  static constexpr C canonicalNanOf() {
    if constexpr (sizeof(C) == 4) return __builtin_nanf("");
    else return __builtin_nan("");
  }

  /// a op b lane by lane; C is the lane type (float for fp16/bf16). Float
  /// sum/prod results may still hold any NaN: see canonicalize().
  template <Op kOp, class C, class V>
  static V apply(V a, V b) {
    if constexpr (std::is_integral_v<C>) {
      // sum/prod wrap: unsigned arithmetic has no overflow UB.
      using U = typename VecOf<std::make_unsigned_t<C>, sizeof(V)>::type;
      const U x = reinterpret_cast<U>(a), y = reinterpret_cast<U>(b);
      if constexpr (kOp == Op::kSum) return reinterpret_cast<V>(x + y);
      else if constexpr (kOp == Op::kProd) return reinterpret_cast<V>(x * y);
      else if constexpr (kOp == Op::kMax) return a > b ? a : b;
      else if constexpr (kOp == Op::kMin) return a < b ? a : b;
      else if constexpr (kOp == Op::kBand) return a & b;
      else if constexpr (kOp == Op::kBor) return a | b;
      else return a ^ b;
    } else if constexpr (kOp == Op::kSum) {
      return a + b;
    } else if constexpr (kOp == Op::kProd) {
      return a * b;
    } else {  // the result of max/min is not NaN when one input is: test the inputs
      const V r = kOp == Op::kMax ? (a > b ? a : b) : (a < b ? a : b);
      return ((a != a) | (b != b)) ? V{} + canonicalNanOf<C>() : r;
    }
  }

  /// Replaces every NaN lane of the n vectors with the canonical NaN. One
  /// unordered compare covers two vectors; lanes are rewritten only when
  /// some lane is NaN.
  template <class C, class V, size_t n>
  static void canonicalize(V (&r)[n]) {
    if constexpr (std::is_floating_point_v<C>) {
      auto nan = Isa::unordered(r[0], r[n - 1]);
#pragma GCC unroll 8
      for (size_t k = 1; k + 1 < n; k += 2) nan = nan | Isa::unordered(r[k], r[k + 1]);
      if (__builtin_expect(Isa::any(nan), 0)) {
#pragma GCC unroll 8
        for (V& v : r) v = v != v ? V{} + canonicalNanOf<C>() : v;
      }
    }
  }

  /// dst[i] = a[i] op b[i] for `blocks` whole blocks (kGroup = blocks per
  /// call, all loads before the stores so exact aliasing is harmless).
  template <class T, Op kOp, size_t kGroup>
  static void reduceBlocks(unsigned char* out, const unsigned char* x, const unsigned char* y) {
    using L = Lanes<Isa, T>;
    using V = typename L::V;
    using C = typename L::Compute;
    constexpr size_t kBlockBytes = L::kCount * sizeof(T), kVectors = kGroup * L::kParts;
    // The loops have constant trip counts; unrolled, r[] stays in registers.
    V r[kVectors], vy[L::kParts];
#pragma GCC unroll 8
    for (size_t k = 0; k < kGroup; ++k) {
      L::load(x + k * kBlockBytes, &r[k * L::kParts]);
      L::load(y + k * kBlockBytes, vy);
#pragma GCC unroll 2
      for (size_t p = 0; p < L::kParts; ++p) r[k * L::kParts + p] = apply<kOp, C>(r[k * L::kParts + p], vy[p]);
    }
    if constexpr (kOp == Op::kSum || kOp == Op::kProd) canonicalize<C>(r);
#pragma GCC unroll 8
    for (size_t k = 0; k < kGroup; ++k) L::store(out + k * kBlockBytes, &r[k * L::kParts]);
  }

  /// dst[i] = a[i] op b[i]; see kernel_table.h for the contract.
  template <class T, Op kOp>
  static void reduce(void* dst, const void* a, const void* b, size_t count) {
    using L = Lanes<Isa, T>;
    constexpr size_t kBlock = L::kCount, kBlockBytes = kBlock * sizeof(T), kUnroll = 4;
    auto* out = static_cast<unsigned char*>(dst);
    auto* x = static_cast<const unsigned char*>(a);
    auto* y = static_cast<const unsigned char*>(b);
    size_t i = 0;
    for (; i + kUnroll * kBlock <= count; i += kUnroll * kBlock) {
      const size_t at = i * sizeof(T);
      reduceBlocks<T, kOp, kUnroll>(out + at, x + at, y + at);
    }
    for (; i + kBlock <= count; i += kBlock) {
      const size_t at = i * sizeof(T);
      reduceBlocks<T, kOp, 1>(out + at, x + at, y + at);
    }
    if (i < count) {
      const size_t at = i * sizeof(T), rest = (count - i) * sizeof(T);
      alignas(64) unsigned char ta[kBlockBytes] = {}, tb[kBlockBytes] = {}, tout[kBlockBytes];
      __builtin_memcpy(ta, x + at, rest);
      __builtin_memcpy(tb, y + at, rest);
      reduceBlocks<T, kOp, 1>(tout, ta, tb);
      __builtin_memcpy(out + at, tout, rest);
    }
  }

  /// dst[i] = src[i] / divisor; integers truncate toward zero, floats divide
  /// in their compute precision and round once (NaN: canonical).
  template <class T>
  static void divide(void* dst, const void* src, size_t count, int divisor) {
    if (divisor < 1) failBadDivisor(divisor);
    auto* out = static_cast<unsigned char*>(dst);
    auto* in = static_cast<const unsigned char*>(src);
    if constexpr (std::is_integral_v<T>) {
      // Integer division has no SIMD instruction; a scalar loop it is.
      using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
      const Wide d = static_cast<Wide>(divisor);
      for (size_t i = 0; i < count; ++i) {
        T v;
        __builtin_memcpy(&v, in + i * sizeof(T), sizeof(T));
        v = static_cast<T>(static_cast<Wide>(v) / d);
        __builtin_memcpy(out + i * sizeof(T), &v, sizeof(T));
      }
    } else {
      using L = Lanes<Isa, T>;
      using V = typename L::V;
      using C = typename L::Compute;
      constexpr size_t kBlock = L::kCount, kBlockBytes = kBlock * sizeof(T);
      const V d = V{} + static_cast<C>(divisor);
      auto divideBlock = [&](unsigned char* to, const unsigned char* from) {
        V v[L::kParts];
        L::load(from, v);
#pragma GCC unroll 2
        for (V& part : v) part = part / d;
        canonicalize<C>(v);
        L::store(to, v);
      };
      size_t i = 0;
      for (; i + kBlock <= count; i += kBlock) divideBlock(out + i * sizeof(T), in + i * sizeof(T));
      if (i < count) {
        const size_t at = i * sizeof(T), rest = (count - i) * sizeof(T);
        alignas(64) unsigned char tin[kBlockBytes] = {}, tout[kBlockBytes];
        __builtin_memcpy(tin, in + at, rest);
        divideBlock(tout, tin);
        __builtin_memcpy(out + at, tout, rest);
      }
    }
  }
};

}  // namespace coil::reduce::simd
