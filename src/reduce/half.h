// Scalar fp16 / bf16 <-> fp32 conversions, bit by bit, round-to-nearest-even.
//
// These define the results the SIMD paths must reproduce bit for bit:
//   * fp16 -> fp32 is exact; a NaN comes out quiet (quiet bit set, payload
//     shifted up), as F16C's vcvtph2ps does.
//   * fp32 -> fp16 rounds to nearest even, overflows to ±Inf at 65520,
//     produces subnormals, and turns a NaN into a quiet NaN keeping the top
//     9 payload bits (vcvtps2ph with imm8 = round-to-nearest does the same).
//   * bf16 -> fp32 is a 16-bit shift (exact, NaNs keep their bits).
//   * fp32 -> bf16 rounds to nearest even by integer arithmetic; a NaN keeps
//     its top payload bits and gets the quiet bit, so it never rounds to Inf.
//
// Functions are `static inline` on purpose: every translation unit gets its
// own copy compiled with its own flags, so the linker can never merge a
// copy built for AVX into code that must run on any x86-64.
#pragma once

#include <bit>
#include <cstdint>

namespace coil::reduce::scalar {

/// Exact widening of an IEEE binary16 value; NaNs come back quiet.
static inline float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1F) {  // Inf or NaN
    bits = sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
  } else if (exponent != 0) {  // normal: rebias 15 -> 127
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // ±0
    bits = sign;
  } else {  // subnormal mantissa·2^-24: shift the leading one up to bit 10
    const int shift = std::countl_zero(mantissa) - 21;
    mantissa = (mantissa << shift) & 0x3FFu;
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

/// Rounds to the nearest binary16 value, ties to even.
static inline uint16_t floatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)  // NaN: quiet, top payload bits kept
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u)  // >= 65520 (halfway to 2^16, ties to even): Inf
    return static_cast<uint16_t>(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) {  // >= 2^-14: normal result
    uint32_t rebiased = magnitude - 0x38000000u;  // exponent 127 -> 15
    rebiased += 0x0FFFu + ((rebiased >> 13) & 1u);  // round half to even
    return static_cast<uint16_t>(sign | (rebiased >> 13));  // a carry bumps the exponent: right
  }
  if (magnitude <= 0x33000000u)  // <= 2^-25: rounds to ±0 (2^-25 is a tie, 0 is even)
    return static_cast<uint16_t>(sign);
  // Subnormal result: value = m·2^(e-150); in units of 2^-24 that is m >> (126 - e).
  const uint32_t exponent = magnitude >> 23;
  const uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24
  uint32_t quotient = mantissa >> shift;
  const uint32_t remainder = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (remainder > half || (remainder == half && (quotient & 1u))) ++quotient;
  return static_cast<uint16_t>(sign | quotient);  // 0x400 (smallest normal) is right too
}

/// Exact widening of a bfloat16 value.
static inline float bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

/// Rounds to the nearest bfloat16 value, ties to even; NaNs stay (quiet) NaNs.
static inline uint16_t floatToBf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace coil::reduce::scalar
