// An independent scalar reference for the reduction kernels, written for
// the tests only. It shares no code with src/reduce:
//   * fp16/bf16 are decoded with ldexp and rounded with exact double
//     arithmetic and nearbyint (the library works on bit fields);
//   * every float result is computed in double and rounded ONCE to the
//     element type. The library computes fp16/bf16 in fp32 and rounds again;
//     both agree because fp32 (and double) carry at least 2p+2 bits for
//     p-bit targets, which makes double rounding of + - * / innocuous.
//   * integer sums/products wrap in uint64_t and are truncated.
// Elements travel as their raw bits in a uint64_t. Results are exact bits:
// a NaN result is the canonical quiet NaN (simd_kernels.h says why).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "coil.h"
#include "reduce/kernel_table.h"

namespace coil::reduce::ref {

enum class Kind { kSigned, kUnsigned, kHalf, kBf16, kFloat, kDouble };

inline Kind kindOf(coilDataType_t t) {
  switch (t) {
    case coilInt8: case coilInt32: case coilInt64: return Kind::kSigned;
    case coilUint8: case coilUint32: case coilUint64: return Kind::kUnsigned;
    case coilFloat16: return Kind::kHalf;
    case coilBfloat16: return Kind::kBf16;
    case coilFloat32: return Kind::kFloat;
    default: return Kind::kDouble;
  }
}

inline size_t sizeOf(coilDataType_t t) {
  switch (t) {
    case coilInt8: case coilUint8: return 1;
    case coilFloat16: case coilBfloat16: return 2;
    case coilInt32: case coilUint32: case coilFloat32: return 4;
    default: return 8;
  }
}

/// A 16-bit float format: fp16 (5-bit exponent) or bf16 (8-bit exponent).
struct Format16 {
  int mantissaBits;  // 10 or 7
  int exponentBits;  // 5 or 8
  int bias() const { return (1 << (exponentBits - 1)) - 1; }
  int minExponent() const { return 1 - bias(); }
  int maxExponent() const { return bias(); }
  uint16_t infBits() const { return static_cast<uint16_t>(((1 << exponentBits) - 1) << mantissaBits); }
  uint16_t quietBit() const { return static_cast<uint16_t>(1 << (mantissaBits - 1)); }
};
constexpr Format16 kHalfFormat{10, 5};
constexpr Format16 kBf16Format{7, 8};

/// Exact value of a 16-bit float (NaN for any NaN pattern).
inline double decode16(uint16_t bits, Format16 f) {
  const int exponent = (bits >> f.mantissaBits) & ((1 << f.exponentBits) - 1);
  const int mantissa = bits & ((1 << f.mantissaBits) - 1);
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == (1 << f.exponentBits) - 1) return mantissa ? std::nan("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, f.minExponent() - f.mantissaBits);
  return sign * std::ldexp((1 << f.mantissaBits) + mantissa, exponent - f.bias() - f.mantissaBits);
}

/// x rounded to the nearest 16-bit float, ties to even (x must not be NaN).
inline uint16_t round16(double x, Format16 f) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double ax = std::fabs(x);
  if (std::isinf(ax)) return sign | f.infBits();
  int e = ax == 0 ? f.minExponent() : std::max(std::ilogb(ax), f.minExponent());
  // ax / quantum is exact (a power-of-two scale); nearbyint rounds half to even.
  double m = std::nearbyint(std::ldexp(ax, f.mantissaBits - e));
  if (m >= std::ldexp(1.0, f.mantissaBits + 1)) {  // rounded up to the next binade
    m /= 2;
    ++e;
  }
  if (e > f.maxExponent()) return sign | f.infBits();
  const auto im = static_cast<uint32_t>(m);
  if (im < (1u << f.mantissaBits)) return static_cast<uint16_t>(sign | im);  // subnormal / 0
  const uint32_t biased = static_cast<uint32_t>(e + f.bias());
  return static_cast<uint16_t>(sign | (biased << f.mantissaBits) | (im - (1u << f.mantissaBits)));
}

inline bool isNan16(uint16_t bits, Format16 f) {
  return (bits & 0x7FFF) > f.infBits();
}

inline float bitsToFloat(uint64_t b) {
  const auto u = static_cast<uint32_t>(b);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint64_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline double bitsToDouble(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}
inline uint64_t doubleToBits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

/// Value of a float element (any float kind) as a double.
inline double floatValue(Kind k, uint64_t bits) {
  switch (k) {
    case Kind::kHalf: return decode16(static_cast<uint16_t>(bits), kHalfFormat);
    case Kind::kBf16: return decode16(static_cast<uint16_t>(bits), kBf16Format);
    case Kind::kFloat: return bitsToFloat(bits);
    default: return bitsToDouble(bits);
  }
}

/// The canonical quiet NaN every float kernel writes for a NaN result.
inline uint64_t canonicalNan(Kind k) {
  switch (k) {
    case Kind::kHalf: return 0x7E00;
    case Kind::kBf16: return 0x7FC0;
    case Kind::kFloat: return 0x7FC00000u;
    default: return 0x7FF8000000000000ull;
  }
}

/// A double rounded once to the element's float type, as bits.
inline uint64_t roundTo(Kind k, double x) {
  switch (k) {
    case Kind::kHalf: return round16(x, kHalfFormat);
    case Kind::kBf16: return round16(x, kBf16Format);
    case Kind::kFloat: return floatToBits(static_cast<float>(x));
    default: return doubleToBits(x);
  }
}

/// Sign-extends (signed kinds) or zero-extends the low `size` bytes.
inline uint64_t extend(uint64_t bits, size_t size, bool isSigned) {
  if (size == 8) return bits;
  const unsigned shift = static_cast<unsigned>(64 - 8 * size);
  if (isSigned) return static_cast<uint64_t>(static_cast<int64_t>(bits << shift) >> shift);
  return (bits << shift) >> shift;
}

inline uint64_t truncate(uint64_t v, size_t size) {
  return size == 8 ? v : v & ((uint64_t{1} << (8 * size)) - 1);
}

/// Expected bits of `a op b` for one element.
inline uint64_t reduceOne(coilDataType_t t, Op op, uint64_t a, uint64_t b) {
  const Kind k = kindOf(t);
  const size_t size = sizeOf(t);
  if (k == Kind::kSigned || k == Kind::kUnsigned) {
    const bool s = k == Kind::kSigned;
    const uint64_t x = extend(a, size, s), y = extend(b, size, s);
    switch (op) {
      case Op::kSum: return truncate(x + y, size);
      case Op::kProd: return truncate(x * y, size);
      case Op::kMax:
        return truncate(s ? (static_cast<int64_t>(x) > static_cast<int64_t>(y) ? x : y) : (x > y ? x : y), size);
      case Op::kMin:
        return truncate(s ? (static_cast<int64_t>(x) < static_cast<int64_t>(y) ? x : y) : (x < y ? x : y), size);
      case Op::kBand: return truncate(a & b, size);
      case Op::kBor: return truncate(a | b, size);
      case Op::kBxor: return truncate(a ^ b, size);
    }
  }
  const double x = floatValue(k, a), y = floatValue(k, b);
  if (std::isnan(x) || std::isnan(y)) return canonicalNan(k);
  if (op == Op::kMax || op == Op::kMin) {  // equal (+0/-0) -> b, bits unchanged
    const bool takeA = op == Op::kMax ? x > y : x < y;
    return takeA ? a : b;
  }
  const double r = op == Op::kSum ? x + y : x * y;
  return std::isnan(r) ? canonicalNan(k) : roundTo(k, r);  // Inf-Inf, 0*Inf
}

/// Expected bits of `a / divisor` (integers truncate toward zero).
inline uint64_t divideOne(coilDataType_t t, uint64_t a, int divisor) {
  const Kind k = kindOf(t);
  const size_t size = sizeOf(t);
  if (k == Kind::kUnsigned) return truncate(extend(a, size, false) / static_cast<uint64_t>(divisor), size);
  if (k == Kind::kSigned) {
    const auto v = static_cast<int64_t>(extend(a, size, true));
    // |v| / d, then the sign back: truncation toward zero by construction.
    const uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    const uint64_t q = magnitude / static_cast<uint64_t>(divisor);
    return truncate(v < 0 ? 0 - q : q, size);
  }
  const double x = floatValue(k, a);
  if (std::isnan(x)) return canonicalNan(k);
  return roundTo(k, x / divisor);
}

}  // namespace coil::reduce::ref
