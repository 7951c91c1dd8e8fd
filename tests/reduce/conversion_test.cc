// The public scalar fp16/bf16 conversions: known bit patterns (ties,
// subnormals, overflow, NaN, Inf), then every 16-bit pattern and a sweep of
// fp32 patterns against the test's own ldexp/nearbyint reference.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "reduce/reduce.h"
#include "reference.h"

namespace coil::reduce {
namespace {

uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }
float floatOf(uint32_t b) { return std::bit_cast<float>(b); }

TEST(HalfConversion, KnownHalfToFloat) {
  EXPECT_EQ(halfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(halfToFloat(0xC000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(halfToFloat(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(halfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(bitsOf(halfToFloat(0x8000)), 0x80000000u);  // -0
  EXPECT_EQ(halfToFloat(0x7C00), INFINITY);
  EXPECT_EQ(halfToFloat(0xFC00), -INFINITY);
  EXPECT_EQ(bitsOf(halfToFloat(0x7E00)), 0x7FC00000u);
  EXPECT_EQ(bitsOf(halfToFloat(0x7C01)), 0x7FC02000u);  // signalling -> quiet, payload kept
  EXPECT_EQ(bitsOf(halfToFloat(0xFD55)), 0xFFEAA000u);
}

TEST(HalfConversion, KnownFloatToHalf) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7BFF);  // just below the overflow tie
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);    // tie between 65504 and 2^16: even is Inf
  EXPECT_EQ(floatToHalf(1e6f), 0x7C00);
  EXPECT_EQ(floatToHalf(-1e6f), 0xFC00);
  EXPECT_EQ(floatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xFC00);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0: even
  EXPECT_EQ(floatToHalf(floatOf(0x33000001)), 0x0001);     // just above the tie
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: tie, to even 2
  EXPECT_EQ(floatToHalf(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 ulp: tie, to even 2
  EXPECT_EQ(floatToHalf(std::ldexp(2047.0f, -25)), 0x0400);  // 1023.5 ulp: rounds up to normal
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie: down to even
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie: up to even
  EXPECT_EQ(floatToHalf(2049.0f), 0x6800);  // tie between 2048 and 2050
  EXPECT_EQ(floatToHalf(2051.0f), 0x6802);
  EXPECT_EQ(floatToHalf(floatOf(0x7FC00000)), 0x7E00);
  EXPECT_EQ(floatToHalf(floatOf(0x7F800001)), 0x7E00);  // signalling NaN, low payload: still NaN
  EXPECT_EQ(floatToHalf(floatOf(0xFF802000)), 0xFE01);  // payload's top bits kept, quiet
}

TEST(Bf16Conversion, KnownValues) {
  EXPECT_EQ(bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(bf16ToFloat(0x0001), std::ldexp(1.0f, -133));  // smallest subnormal
  EXPECT_EQ(bf16ToFloat(0x7F80), INFINITY);
  EXPECT_EQ(bitsOf(bf16ToFloat(0x7FC1)), 0x7FC10000u);
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBf16(-2.0f), 0xC000);
  EXPECT_EQ(floatToBf16(floatOf(0x3F808000)), 0x3F80);  // tie: down to even
  EXPECT_EQ(floatToBf16(floatOf(0x3F818000)), 0x3F82);  // tie: up to even
  EXPECT_EQ(floatToBf16(floatOf(0x3F808001)), 0x3F81);
  EXPECT_EQ(floatToBf16(floatOf(0x7F7FFFFF)), 0x7F80);  // FLT_MAX rounds to Inf
  EXPECT_EQ(floatToBf16(floatOf(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(floatToBf16(INFINITY), 0x7F80);
  EXPECT_EQ(floatToBf16(-INFINITY), 0xFF80);
  EXPECT_EQ(floatToBf16(floatOf(0x00008000)), 0x0000);  // subnormal tie: to even 0
  EXPECT_EQ(floatToBf16(floatOf(0x00018000)), 0x0002);
  EXPECT_EQ(floatToBf16(floatOf(0x7F800001)), 0x7FC0);  // NaN never rounds to Inf
  EXPECT_EQ(floatToBf16(floatOf(0x7FFFFFFF)), 0x7FFF);  // nor carries into the sign
  EXPECT_EQ(floatToBf16(floatOf(0xFF810000)), 0xFFC1);
}

/// Checks one widening against decode16; NaN payloads move up unchanged,
/// and fp16 NaNs come out quiet.
::testing::AssertionResult widensExactly(uint16_t h, float got, ref::Format16 format, bool quietens) {
  const double want = ref::decode16(h, format);
  if (std::isnan(want)) {
    const uint32_t payload = (h & ((1u << format.mantissaBits) - 1)) << (23 - format.mantissaBits);
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t wantBits = sign | 0x7F800000u | payload | (quietens ? 0x400000u : 0);
    if (bitsOf(got) == wantBits) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << std::hex << h << " -> " << bitsOf(got) << ", want " << wantBits;
  }
  if (static_cast<double>(got) == want && std::signbit(got) == ((h & 0x8000) != 0))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << std::hex << h << " -> " << got << ", want " << want;
}

TEST(HalfConversion, EveryHalfWidensExactly) {
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_TRUE(widensExactly(static_cast<uint16_t>(h), halfToFloat(static_cast<uint16_t>(h)), ref::kHalfFormat, true));
}

TEST(Bf16Conversion, EveryBf16WidensExactly) {
  for (uint32_t b = 0; b < 65536; ++b)
    ASSERT_TRUE(widensExactly(static_cast<uint16_t>(b), bf16ToFloat(static_cast<uint16_t>(b)), ref::kBf16Format, false));
}

/// fp32 patterns: a strided sweep over all 2^32, plus dense runs around the
/// places where rounding changes character (format boundaries, ties, NaN).
std::vector<uint32_t> floatPatterns(std::initializer_list<uint32_t> hotSpots) {
  std::vector<uint32_t> out;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 1021) out.push_back(static_cast<uint32_t>(b));
  for (uint32_t center : hotSpots)
    for (uint32_t sign : {0u, 0x80000000u})
      for (int d = -2048; d <= 2048; ++d) out.push_back(sign | static_cast<uint32_t>(static_cast<int64_t>(center) + d));
  return out;
}

/// Checks one narrowing against round16; a NaN must stay NaN, become quiet
/// and keep the top payload bits.
::testing::AssertionResult narrowsCorrectly(uint32_t f, uint16_t got, ref::Format16 format) {
  const float value = floatOf(f);
  uint16_t want;
  if (std::isnan(value)) {
    const int dropped = 23 - format.mantissaBits;
    want = static_cast<uint16_t>(((f >> 16) & 0x8000u) | format.infBits() | format.quietBit() |
                                 ((f & 0x7FFFFFu) >> dropped));
  } else {
    want = ref::round16(value, format);
  }
  if (got == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << std::hex << f << " -> " << got << ", want " << want;
}

TEST(HalfConversion, FloatSweepRoundsToNearestEven) {
  for (uint32_t f : floatPatterns({0x477FF000, 0x477FE000, 0x38800000, 0x33000000, 0x33800000,
                                   0x3F800000, 0x7F800000, 0x387FC000}))
    ASSERT_TRUE(narrowsCorrectly(f, floatToHalf(floatOf(f)), ref::kHalfFormat));
}

TEST(Bf16Conversion, FloatSweepRoundsToNearestEven) {
  for (uint32_t f : floatPatterns({0x7F7F8000, 0x00800000, 0x00008000, 0x3F808000, 0x7F800000}))
    ASSERT_TRUE(narrowsCorrectly(f, floatToBf16(floatOf(f)), ref::kBf16Format));
}

TEST(HalfConversion, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const bool nan = ref::isNan16(bits, ref::kHalfFormat);
    ASSERT_EQ(floatToHalf(halfToFloat(bits)), nan ? (bits | 0x0200) : bits) << h;
    const bool bnan = ref::isNan16(bits, ref::kBf16Format);
    ASSERT_EQ(floatToBf16(bf16ToFloat(bits)), bnan ? (bits | 0x0040) : bits) << h;
  }
}

}  // namespace
}  // namespace coil::reduce
