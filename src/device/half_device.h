// fp16 / bf16 <-> fp32 conversions for the GPU kernels, written once as
// `__host__ __device__` functions so that the very same source can be
// compiled for the host by an ordinary C++ compiler and checked, bit by bit,
// against reduce/half.h (tests/gpu/device_convert_test.cc does that, on any
// machine) and compiled for the device by nvcc (device_reduce.cu).
//
// They are line-by-line translations of reduce/half.h (which uses
// std::bit_cast and std::countl_zero, neither of which is __device__):
//   * halfToFloat: exact; a NaN comes out quiet (quiet bit set, payload
//     shifted up);
//   * floatToHalf: round to nearest even, ±Inf from 65520 up, subnormal
//     results, a NaN becomes a quiet NaN keeping its top payload bits;
//   * bf16ToFloat: a 16-bit shift;
//   * floatToBf16: round to nearest even by integer arithmetic; a NaN keeps
//     its top payload bits and gets the quiet bit.
//
// Only integer arithmetic on the bit patterns is used (no float arithmetic
// that FTZ/DAZ or fast-math could change), so host and device agree.
#pragma once

#include <cstdint>

#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

#if defined(__CUDACC__)
#define COIL_HOST_DEVICE __host__ __device__
#else
#define COIL_HOST_DEVICE
#endif

namespace coil::device::half {

static COIL_HOST_DEVICE inline uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<uint32_t>(f);
#endif
}

static COIL_HOST_DEVICE inline float bitsFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

/// Leading zero bits of a nonzero 32-bit value.
static COIL_HOST_DEVICE inline int countlZero(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __clz(static_cast<int>(x));
#else
  return std::countl_zero(x);
#endif
}

/// Exact widening of an IEEE binary16 value, as bits of the fp32 result;
/// NaNs come back quiet.
static COIL_HOST_DEVICE inline uint32_t halfToFloatBits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (static_cast<uint32_t>(h) >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu)  // Inf or NaN
    return sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
  if (exponent != 0)  // normal: rebias 15 -> 127
    return sign | ((exponent + 112u) << 23) | (mantissa << 13);
  if (mantissa == 0) return sign;  // ±0
  // subnormal mantissa·2^-24: shift the leading one up to bit 10
  const int shift = countlZero(mantissa) - 21;
  mantissa = (mantissa << shift) & 0x3FFu;
  return sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
}

static COIL_HOST_DEVICE inline float halfToFloat(uint16_t h) { return bitsFloat(halfToFloatBits(h)); }

/// Rounds fp32 (given as bits) to the nearest binary16 value, ties to even.
static COIL_HOST_DEVICE inline uint16_t floatBitsToHalf(uint32_t bits) {
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

static COIL_HOST_DEVICE inline uint16_t floatToHalf(float f) { return floatBitsToHalf(floatBits(f)); }

/// Exact widening of a bfloat16 value, as bits of the fp32 result.
static COIL_HOST_DEVICE inline uint32_t bf16ToFloatBits(uint16_t b) {
  return static_cast<uint32_t>(b) << 16;
}

static COIL_HOST_DEVICE inline float bf16ToFloat(uint16_t b) { return bitsFloat(bf16ToFloatBits(b)); }

/// Rounds fp32 (given as bits) to the nearest bfloat16 value, ties to even;
/// NaNs stay (quiet) NaNs.
static COIL_HOST_DEVICE inline uint16_t floatBitsToBf16(uint32_t bits) {
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

static COIL_HOST_DEVICE inline uint16_t floatToBf16(float f) { return floatBitsToBf16(floatBits(f)); }

}  // namespace coil::device::half
