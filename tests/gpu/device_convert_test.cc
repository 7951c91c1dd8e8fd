// src/device/half_device.h compiled for the host and compared, bit for bit,
// with reduce/half.h (the CPU kernels' conversions). Needs no GPU: the
// functions are the same source nvcc compiles for the device (where they are
// the software fp16 codec and the bf16 conversions of device_reduce.cu;
// tests/gpu/device_reduce_test.cc checks the device's results too).
//
// Every fp16 and bf16 value is widened; fp32 values are narrowed from a
// structured set that holds the neighbourhood of every rounding tie of both
// formats (normal and subnormal fp16 results) plus random bits. All 2^32
// fp32 inputs: set COIL_CONVERT_EXHAUSTIVE=1 (a few seconds at -O2).
#include <gtest/gtest.h>

#include <bit>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "device/half_device.h"
#include "reduce/half.h"

namespace {

namespace dev = coil::device::half;
namespace ref = coil::reduce::scalar;

bool halfIsNan(uint16_t h) { return (h & 0x7FFFu) > 0x7C00u; }
bool bf16IsNan(uint16_t b) { return (b & 0x7FFFu) > 0x7F80u; }

/// fp32 bit patterns around every rounding decision of fp16 and bf16.
std::vector<uint32_t> narrowingInputs() {
  std::vector<uint32_t> v;
  // fp16 normal results: all sign/exponent/10-bit-mantissa prefixes, low 13 bits near the tie.
  for (uint32_t prefix = 0; prefix < (1u << 19); ++prefix)
    for (uint32_t low : {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x1FFFu})
      v.push_back((prefix << 13) | low);
  // bf16: all 16-bit prefixes, low 16 bits near the tie.
  for (uint32_t prefix = 0; prefix < (1u << 16); ++prefix)
    for (uint32_t low : {0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      v.push_back((prefix << 16) | low);
  // fp16 subnormal results: exponent e keeps 126-e fewer bits; the tie is
  // bit (125-e) of the 24-bit significand (implicit one at bit 23).
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t e = 100; e <= 113; ++e) {
      const uint32_t shift = 126 - e;  // 13..26
      const uint32_t tieBit = shift - 1;
      if (tieBit > 23) {
        for (uint32_t m : {0u, 1u, 0x400000u, 0x7FFFFFu}) v.push_back(sign | (e << 23) | m);
        continue;
      }
      const uint32_t tie = 1u << tieBit;
      for (uint32_t upper = 0; upper < (1u << (23 - tieBit)); ++upper)
        for (uint32_t low : {0u, 1u, tie - 1, tie, tie + 1, 2 * tie - 1}) {
          const uint32_t significand = (upper << (tieBit + 1)) | low;  // bit 23 may be set
          v.push_back(sign | (e << 23) | (significand & 0x7FFFFFu));
        }
    }
  }
  // Named edges: 65504, 65520 and neighbours, the smallest normal, 2^-25, Inf, NaNs.
  for (uint32_t edge : {0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x47800000u, 0x38800000u,
                        0x387FFFFFu, 0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x7F800000u, 0x7F800001u,
                        0x7FC00000u, 0x7FFFFFFFu, 0x7FBFFFFFu, 0x7F802000u, 0x7F801FFFu, 0x00000001u})
    for (uint32_t sign : {0u, 0x80000000u}) v.push_back(edge | sign);
  // Random bits (splitmix64) and a sweep over the whole range.
  uint64_t state = 0x5EED;
  for (int i = 0; i < 2000000; ++i) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    v.push_back(static_cast<uint32_t>(z ^ (z >> 31)));
  }
  for (uint64_t x = 0; x <= 0xFFFFFFFFull; x += 65521) v.push_back(static_cast<uint32_t>(x));
  return v;
}

TEST(DeviceConvert, WideningMatchesForEvery16BitValue) {
  int failures = 0;
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const uint32_t wantHalf = std::bit_cast<uint32_t>(ref::halfToFloat(bits));
    const uint32_t gotHalf = dev::halfToFloatBits(bits);
    const uint32_t wantBf = std::bit_cast<uint32_t>(ref::bf16ToFloat(bits));
    const uint32_t gotBf = dev::bf16ToFloatBits(bits);
    if ((wantHalf != gotHalf || wantBf != gotBf) && ++failures <= 10)
      ADD_FAILURE() << std::hex << "input 0x" << h << ": fp16 want 0x" << wantHalf << " got 0x" << gotHalf
                    << ", bf16 want 0x" << wantBf << " got 0x" << gotBf;
    ASSERT_EQ(std::bit_cast<uint32_t>(dev::halfToFloat(bits)), gotHalf);
    ASSERT_EQ(std::bit_cast<uint32_t>(dev::bf16ToFloat(bits)), gotBf);
  }
  EXPECT_EQ(failures, 0);
}

// The GPU max/min kernels return an operand's own bits instead of
// narrow(widen(x)): that is the same for every non-NaN value.
TEST(DeviceConvert, NarrowOfWidenIsIdentityForNonNan) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    if (!halfIsNan(bits)) {
      ASSERT_EQ(ref::floatToHalf(ref::halfToFloat(bits)), bits) << std::hex << "fp16 0x" << h;
      ASSERT_EQ(dev::floatToHalf(dev::halfToFloat(bits)), bits) << std::hex << "fp16 0x" << h;
    }
    if (!bf16IsNan(bits)) {
      ASSERT_EQ(ref::floatToBf16(ref::bf16ToFloat(bits)), bits) << std::hex << "bf16 0x" << h;
      ASSERT_EQ(dev::floatToBf16(dev::bf16ToFloat(bits)), bits) << std::hex << "bf16 0x" << h;
    }
  }
}

// The kernels write the canonical NaN of each format; it is what the CPU's
// narrowing makes of the canonical fp32 NaN.
TEST(DeviceConvert, CanonicalNans) {
  EXPECT_EQ(ref::floatToHalf(std::bit_cast<float>(0x7FC00000u)), 0x7E00u);
  EXPECT_EQ(ref::floatToBf16(std::bit_cast<float>(0x7FC00000u)), 0x7FC0u);
  EXPECT_EQ(dev::floatBitsToHalf(0x7FC00000u), 0x7E00u);
  EXPECT_EQ(dev::floatBitsToBf16(0x7FC00000u), 0x7FC0u);
}

size_t compareNarrowing(const std::vector<uint32_t>& inputs) {
  size_t failures = 0;
  for (uint32_t bits : inputs) {
    const float f = std::bit_cast<float>(bits);
    const uint16_t wantHalf = ref::floatToHalf(f), gotHalf = dev::floatBitsToHalf(bits);
    const uint16_t wantBf = ref::floatToBf16(f), gotBf = dev::floatBitsToBf16(bits);
    if (wantHalf != gotHalf || wantBf != gotBf || dev::floatToHalf(f) != gotHalf ||
        dev::floatToBf16(f) != gotBf) {
      if (++failures <= 10)
        ADD_FAILURE() << std::hex << "fp32 0x" << bits << ": fp16 want 0x" << wantHalf << " got 0x"
                      << gotHalf << ", bf16 want 0x" << wantBf << " got 0x" << gotBf;
    }
  }
  return failures;
}

TEST(DeviceConvert, NarrowingMatchesAroundEveryTie) {
  const auto inputs = narrowingInputs();
  std::printf("narrowing %zu fp32 inputs\n", inputs.size());
  EXPECT_EQ(compareNarrowing(inputs), 0u);
}

TEST(DeviceConvert, NarrowingMatchesForAllFloats) {
  const char* env = std::getenv("COIL_CONVERT_EXHAUSTIVE");
  if (env == nullptr || env[0] != '1') GTEST_SKIP() << "set COIL_CONVERT_EXHAUSTIVE=1 to run all 2^32 inputs";
  std::vector<uint32_t> chunk(1u << 24);
  size_t failures = 0;
  for (uint64_t base = 0; base <= 0xFFFFFFFFull && failures == 0; base += chunk.size()) {
    for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<uint32_t>(base + i);
    failures += compareNarrowing(chunk);
  }
  EXPECT_EQ(failures, 0u);
}

}  // namespace
