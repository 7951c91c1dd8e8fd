// The portable kernels: plain C++ loops, one element at a time, built with
// the baseline flags of the target (on x86-64: SSE2, which the compiler may
// still auto-vectorize). They are the fallback on CPUs without AVX2 and the
// executable specification the SIMD kernels are tested against bit for bit;
// the semantics are spelled out in simd_kernels.h.
#include <cstring>
#include <limits>
#include <type_traits>

#include "reduce/half.h"
#include "reduce/kernel_table.h"

namespace coil::reduce {
namespace {

/// How a storage type is widened to its compute type and narrowed back.
template <class T>
struct Scalar {
  using Compute = T;
  static T widen(T v) { return v; }
  static T narrow(T v) { return v; }
};
template <>
struct Scalar<Float16> {
  using Compute = float;
  static float widen(Float16 v) { return scalar::halfToFloat(v.bits); }
  static Float16 narrow(float v) { return Float16{scalar::floatToHalf(v)}; }
};
template <>
struct Scalar<BFloat16> {
  using Compute = float;
  static float widen(BFloat16 v) { return scalar::bf16ToFloat(v.bits); }
  static BFloat16 narrow(float v) { return BFloat16{scalar::floatToBf16(v)}; }
};

struct Generic {
  template <Op kOp, class C>
  static C apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      // Wrap like C unsigned arithmetic. Types narrower than unsigned int
      // would promote to (signed) int, so widen to unsigned int first.
      using U = std::make_unsigned_t<C>;
      using W = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, U>;
      const W x = static_cast<U>(a), y = static_cast<U>(b);
      if constexpr (kOp == Op::kSum) return static_cast<C>(static_cast<U>(x + y));
      else if constexpr (kOp == Op::kProd) return static_cast<C>(static_cast<U>(x * y));
      else if constexpr (kOp == Op::kMax) return a > b ? a : b;
      else if constexpr (kOp == Op::kMin) return a < b ? a : b;
      else if constexpr (kOp == Op::kBand) return static_cast<C>(a & b);
      else if constexpr (kOp == Op::kBor) return static_cast<C>(a | b);
      else return static_cast<C>(a ^ b);
    } else {
      // NaN results are canonical; see simd_kernels.h for why.
      if constexpr (kOp == Op::kSum || kOp == Op::kProd) {
        const C r = kOp == Op::kSum ? a + b : a * b;
        return r != r ? canonicalNan<C>() : r;
      } else {
        const C r = kOp == Op::kMax ? (a > b ? a : b) : (a < b ? a : b);
        return (a != a || b != b) ? canonicalNan<C>() : r;
      }
    }
  }

  template <class C>
  static C canonicalNan() {
    return std::numeric_limits<C>::quiet_NaN();  // +qNaN, zero payload
  }

  template <class T, Op kOp>
  static void reduce(void* dst, const void* a, const void* b, size_t count) {
    using S = Scalar<T>;
    auto* out = static_cast<unsigned char*>(dst);
    auto* x = static_cast<const unsigned char*>(a);
    auto* y = static_cast<const unsigned char*>(b);
    for (size_t i = 0; i < count; ++i) {
      T va, vb;
      std::memcpy(&va, x + i * sizeof(T), sizeof(T));
      std::memcpy(&vb, y + i * sizeof(T), sizeof(T));
      const T r = S::narrow(apply<kOp, typename S::Compute>(S::widen(va), S::widen(vb)));
      std::memcpy(out + i * sizeof(T), &r, sizeof(T));
    }
  }

  template <class T>
  static void divide(void* dst, const void* src, size_t count, int divisor) {
    if (divisor < 1) failBadDivisor(divisor);
    using S = Scalar<T>;
    using C = typename S::Compute;
    // Integers divide in a 64-bit type of their signedness (C truncation);
    // floats in their compute precision.
    using D = std::conditional_t<std::is_integral_v<C>,
                                 std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>, C>;
    const D d = static_cast<D>(divisor);
    auto* out = static_cast<unsigned char*>(dst);
    auto* in = static_cast<const unsigned char*>(src);
    for (size_t i = 0; i < count; ++i) {
      T v;
      std::memcpy(&v, in + i * sizeof(T), sizeof(T));
      C q = static_cast<C>(static_cast<D>(S::widen(v)) / d);
      if constexpr (!std::is_integral_v<C>) {
        if (q != q) q = canonicalNan<C>();
      }
      const T r = S::narrow(q);
      std::memcpy(out + i * sizeof(T), &r, sizeof(T));
    }
  }
};

constexpr KernelTable kGenericTable = makeTable<Generic>();

}  // namespace

const KernelTable& genericKernels() { return kGenericTable; }

}  // namespace coil::reduce
