// The divide kernels that finish coilAvg: integers truncate toward zero
// (C division), floats divide in their own precision, fp16/bf16 through fp32
// with one round-to-nearest-even. Every ISA, against the reference.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "reduce/kernel_table.h"
#include "reference.h"
#include "test_data.h"

namespace coil::reduce {
namespace {

using testing::GuardedBuffer;
using testing::kAllTypes;

constexpr size_t kCounts[] = {0, 1, 2, 7, 15, 16, 17, 31, 33, 63, 64, 65, 1000, 4099};
constexpr int kDivisors[] = {1, 2, 3, 5, 7, 8, 255, 1000, 65537};

TEST(Divide, EveryIsaTypeCountAndDivisorMatchesReference) {
  for (coilDataType_t type : kAllTypes) {
    const size_t size = ref::sizeOf(type);
    for (size_t count : kCounts) {
      const auto in = testing::randomElements(type, count, 31 * count + type);
      for (int divisor : kDivisors) {
        for (Isa isa : availableIsas()) {
          for (bool inPlace : {false, true}) {
            GuardedBuffer src(count * size, 1), dst(count * size, 3);
            src.write(in, size);
            GuardedBuffer& out = inPlace ? src : dst;
            dividerFor(isa, type)(out.data(), src.data(), count, divisor);
            for (size_t i = 0; i < count; ++i) {
              const uint64_t want = ref::divideOne(type, in[i], divisor), got = out.element(i, size);
              if (want != got) {
                ADD_FAILURE() << isaName(isa) << " " << typeName(type) << " count=" << count
                              << (inPlace ? " in place" : "") << ": element " << i << " = " << in[i]
                              << " / " << divisor << ": expected " << want << " got " << got;
                break;
              }
            }
            EXPECT_TRUE(out.guardsIntact()) << isaName(isa) << " " << typeName(type);
          }
        }
      }
    }
  }
}

TEST(Divide, IntegersTruncateTowardZero) {
  for (Isa isa : availableIsas()) {
    SCOPED_TRACE(isaName(isa));
    int8_t i8[6] = {-7, 7, -128, 127, -1, 1};
    dividerFor(isa, coilInt8)(i8, i8, 6, 2);
    EXPECT_EQ(i8[0], -3);
    EXPECT_EQ(i8[1], 3);
    EXPECT_EQ(i8[2], -64);
    EXPECT_EQ(i8[3], 63);
    EXPECT_EQ(i8[4], 0);
    EXPECT_EQ(i8[5], 0);
    int32_t i32[3] = {-2147483647 - 1, -10, 10}, o32[3];
    dividerFor(isa, coilInt32)(o32, i32, 3, 3);
    EXPECT_EQ(o32[0], -715827882);
    EXPECT_EQ(o32[1], -3);
    EXPECT_EQ(o32[2], 3);
    uint8_t u8[2] = {255, 254};
    dividerFor(isa, coilUint8)(u8, u8, 2, 255);
    EXPECT_EQ(u8[0], 1);
    EXPECT_EQ(u8[1], 0);
    uint32_t u32[1] = {0xFFFFFFFFu};
    dividerFor(isa, coilUint32)(u32, u32, 1, 2);
    EXPECT_EQ(u32[0], 0x7FFFFFFFu);  // not divided as a negative int
    int64_t i64[2] = {INT64_MIN, -5};
    dividerFor(isa, coilInt64)(i64, i64, 2, 4);
    EXPECT_EQ(i64[0], INT64_MIN / 4);
    EXPECT_EQ(i64[1], -1);
    uint64_t u64[1] = {~uint64_t{0}};
    dividerFor(isa, coilUint64)(u64, u64, 1, 3);
    EXPECT_EQ(u64[0], 0x5555555555555555ull);
  }
}

TEST(Divide, FloatsRoundOnceInTheirPrecision) {
  for (Isa isa : availableIsas()) {
    SCOPED_TRACE(isaName(isa));
    uint16_t h[3] = {0x3C00, 0xC000, 0x0001};  // 1, -2, 2^-24
    dividerFor(isa, coilFloat16)(h, h, 3, 3);
    EXPECT_EQ(h[0], 0x3555);  // 1/3 in fp16
    EXPECT_EQ(h[1], 0xB955);  // -2/3
    EXPECT_EQ(h[2], 0x0000);  // 2^-24/3 < half the smallest subnormal
    uint16_t bf[2] = {0x3F80, 0x4040};  // 1, 3
    dividerFor(isa, coilBfloat16)(bf, bf, 2, 3);
    EXPECT_EQ(bf[0], 0x3EAB);  // 0x3EAAAAAB rounds up
    EXPECT_EQ(bf[1], 0x3F80);
    float f[2] = {1.0f, -7.0f};
    dividerFor(isa, coilFloat32)(f, f, 2, 3);
    EXPECT_EQ(f[0], 1.0f / 3.0f);
    EXPECT_EQ(f[1], -7.0f / 3.0f);
    double d[1] = {1.0};
    dividerFor(isa, coilFloat64)(d, d, 1, 3);
    EXPECT_EQ(d[0], 1.0 / 3.0);
  }
}

TEST(Divide, RejectsDivisorBelowOne) {
  for (Isa isa : availableIsas()) {
    for (coilDataType_t type : kAllTypes) {
      uint64_t buf[2] = {1, 2};
      for (int divisor : {0, -1}) {
        try {
          dividerFor(isa, type)(buf, buf, 2, divisor);
          ADD_FAILURE() << isaName(isa) << " " << typeName(type) << ": divisor " << divisor << " accepted";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), coilInvalidArgument);
          EXPECT_NE(std::string(e.what()).find("divisor"), std::string::npos) << e.what();
        }
      }
    }
  }
  uint16_t h[1] = {0x3C00};
  EXPECT_THROW(divider(coilFloat16)(h, h, 1, 0), Error);
}

TEST(Divide, PublicDividerIsTheActiveIsas) {
  for (coilDataType_t type : kAllTypes) EXPECT_EQ(divider(type), dividerFor(activeIsaId(), type));
}

}  // namespace
}  // namespace coil::reduce
