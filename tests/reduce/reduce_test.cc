// The reduction kernels of every available ISA against the independent
// scalar reference (reference.h): every type x op, awkward counts,
// misaligned and in-place buffers, guard bytes around the output. Then all
// ISAs against each other, bit for bit, on inputs full of NaNs and ties.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "reduce/kernel_table.h"
#include "reference.h"
#include "test_data.h"

namespace coil::reduce {
namespace {

using testing::GuardedBuffer;
using testing::kAllOps;
using testing::kAllTypes;
using testing::redOpOf;

constexpr size_t kCounts[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 257, 1000};
constexpr size_t kLargeCount = 1000003;  // prime: no vector width divides it

/// Where the operands sit: byte offsets from a 64-byte boundary, and
/// whether dst is one of the inputs.
struct Layout {
  const char* name;
  size_t aOffset, bOffset, dstOffset;  // in bytes
  enum Alias { kNone, kDstIsA, kDstIsB } alias;
};

std::vector<Layout> layoutsFor(size_t elemSize, bool large) {
  const Layout misaligned{"bytes+1/+3/+5", 1, 3, 5, Layout::kNone};
  const Layout inPlaceA{"dst==a(+1 byte)", 1, 0, 0, Layout::kDstIsA};
  if (large) return {inPlaceA};  // the big count is about the main loop; keep it quick
  return {{"aligned", 0, 0, 0, Layout::kNone},
          {"elem+1", elemSize, elemSize, elemSize, Layout::kNone},
          misaligned,
          inPlaceA,
          {"dst==b(+1 elem)", 0, elemSize, 0, Layout::kDstIsB}};
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

/// One test vector: inputs and expected output, as elements and as bytes.
struct Case {
  coilDataType_t type;
  Op op;
  std::vector<uint64_t> a, b, expected;
  std::vector<unsigned char> aBytes, bBytes, expectedBytes;
};

std::vector<unsigned char> packBytes(const std::vector<uint64_t>& elements, size_t size) {
  std::vector<unsigned char> out(elements.size() * size);
  for (size_t i = 0; i < elements.size(); ++i) std::memcpy(&out[i * size], &elements[i], size);
  return out;
}

/// Runs one kernel on one layout and checks every element and the guards.
void checkCase(Isa isa, const Case& c, const Layout& layout) {
  const size_t size = ref::sizeOf(c.type), count = c.a.size(), bytes = count * size;
  GuardedBuffer bufA(bytes, layout.aOffset), bufB(bytes, layout.bOffset), bufD(bytes, layout.dstOffset);
  // An empty vector's data() may be NULL, which memcpy and memcmp must not
  // get even for 0 bytes; count 0 checks only that nothing was written.
  if (bytes == 0) {
    kernelFor(isa, c.type, redOpOf(c.op))(bufD.data(), bufA.data(), bufB.data(), 0);
    EXPECT_TRUE(bufA.guardsIntact() && bufB.guardsIntact() && bufD.guardsIntact())
        << "count 0 wrote to memory";
    return;
  }
  std::memcpy(bufA.data(), c.aBytes.data(), bytes);
  std::memcpy(bufB.data(), c.bBytes.data(), bytes);
  GuardedBuffer& out = layout.alias == Layout::kDstIsA ? bufA : layout.alias == Layout::kDstIsB ? bufB : bufD;
  kernelFor(isa, c.type, redOpOf(c.op))(out.data(), bufA.data(), bufB.data(), count);

  const std::string where = std::string(isaName(isa)) + " " + typeName(c.type) + " " +
                            opName(redOpOf(c.op)) + " count=" + std::to_string(count) + " " + layout.name;
  if (std::memcmp(out.data(), c.expectedBytes.data(), bytes) != 0) {
    for (size_t i = 0; i < count; ++i) {
      const uint64_t got = out.element(i, size);
      if (c.expected[i] != got) {
        ADD_FAILURE() << where << ": element " << i << ": " << hex(c.a[i]) << " op " << hex(c.b[i])
                      << " expected " << hex(c.expected[i]) << " got " << hex(got);
        break;
      }
    }
  }
  EXPECT_TRUE(out.guardsIntact()) << where << ": wrote outside dst";
  // The inputs that are not dst stay as they were.
  if (layout.alias != Layout::kDstIsA) {
    EXPECT_EQ(std::memcmp(bufA.data(), c.aBytes.data(), bytes), 0) << where << ": input a changed";
  }
  if (layout.alias != Layout::kDstIsB) {
    EXPECT_EQ(std::memcmp(bufB.data(), c.bBytes.data(), bytes), 0) << where << ": input b changed";
  }
}

class ReduceKernelTest : public ::testing::TestWithParam<coilDataType_t> {};

TEST_P(ReduceKernelTest, EveryIsaOpCountAndLayoutMatchesReference) {
  const coilDataType_t type = GetParam();
  const auto isas = availableIsas();
  std::vector<size_t> counts(std::begin(kCounts), std::end(kCounts));
  counts.push_back(kLargeCount);
  const size_t size = ref::sizeOf(type);
  uint64_t seed = 1000 * static_cast<uint64_t>(type);
  for (size_t count : counts) {
    Case c{type, Op::kSum, testing::randomElements(type, count, seed + 1),
           testing::randomElements(type, count, seed + 2), {}, {}, {}, {}};
    seed += 2;
    c.aBytes = packBytes(c.a, size);
    c.bBytes = packBytes(c.b, size);
    c.expected.resize(count);
    for (Op op : kAllOps) {
      if (!testing::hasKernel(type, op)) continue;
      c.op = op;
      for (size_t i = 0; i < count; ++i) c.expected[i] = ref::reduceOne(type, op, c.a[i], c.b[i]);
      c.expectedBytes = packBytes(c.expected, size);
      for (Isa isa : isas)
        for (const Layout& layout : layoutsFor(size, count == kLargeCount)) checkCase(isa, c, layout);
    }
  }
}

/// Runs `isa`'s kernel on (a, b) and returns the output bytes.
std::vector<unsigned char> runBytes(Isa isa, coilDataType_t type, Op op, const std::vector<uint64_t>& a,
                                    const std::vector<uint64_t>& b) {
  const size_t size = ref::sizeOf(type);
  GuardedBuffer bufA(a.size() * size, 0), bufB(b.size() * size, 0), out(a.size() * size, 0);
  bufA.write(a, size);
  bufB.write(b, size);
  kernelFor(isa, type, redOpOf(op))(out.data(), bufA.data(), bufB.data(), a.size());
  return std::vector<unsigned char>(out.data(), out.data() + a.size() * size);
}

/// Pairs that cover every 16-bit pattern as `a` against three different
/// partners, plus random pairs; or random pairs for the wider types.
void crossIsaInputs(coilDataType_t type, std::vector<uint64_t>& a, std::vector<uint64_t>& b) {
  if (ref::sizeOf(type) == 2) {  // fp16, bf16
    for (uint64_t round = 0; round < 3; ++round)
      for (uint64_t h = 0; h < 65536; ++h) {
        a.push_back(h);
        b.push_back((h * (40503 + 2 * round) + 7 * round) & 0xFFFF);  // odd factor: a bijection
      }
  }
  const auto ra = testing::randomElements(type, 100003, 77), rb = testing::randomElements(type, 100003, 78);
  a.insert(a.end(), ra.begin(), ra.end());
  b.insert(b.end(), rb.begin(), rb.end());
}

/// Index of the first differing element of two outputs, or npos.
size_t firstDifference(const std::vector<unsigned char>& x, const std::vector<unsigned char>& y, size_t size) {
  for (size_t i = 0; i * size < x.size(); ++i)
    if (std::memcmp(&x[i * size], &y[i * size], size) != 0) return i;
  return std::string::npos;
}

uint64_t elementAt(const std::vector<unsigned char>& bytes, size_t i, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, &bytes[i * size], size);
  return v;
}

TEST_P(ReduceKernelTest, AllIsasAreBitIdenticalToGeneric) {
  const coilDataType_t type = GetParam();
  const size_t size = ref::sizeOf(type);
  std::vector<uint64_t> a, b;
  crossIsaInputs(type, a, b);
  for (Isa isa : availableIsas()) {
    if (isa == Isa::kGeneric) continue;
    for (Op op : kAllOps) {
      if (!testing::hasKernel(type, op)) continue;
      const auto generic = runBytes(Isa::kGeneric, type, op, a, b), simd = runBytes(isa, type, op, a, b);
      const size_t i = firstDifference(generic, simd, size);
      if (i != std::string::npos)
        ADD_FAILURE() << isaName(isa) << " vs generic, " << typeName(type) << " " << opName(redOpOf(op))
                      << " element " << i << ": " << hex(a[i]) << ", " << hex(b[i]) << " -> generic "
                      << hex(elementAt(generic, i, size)) << ", " << isaName(isa) << " "
                      << hex(elementAt(simd, i, size));
    }
    // Divide as well: with divisor 1 this round-trips every 16-bit pattern
    // through the vector conversions.
    for (int divisor : {1, 3, 7, 1000}) {
      std::vector<unsigned char> in(a.size() * size), generic(in.size()), simd(in.size());
      for (size_t i = 0; i < a.size(); ++i) std::memcpy(&in[i * size], &a[i], size);
      dividerFor(Isa::kGeneric, type)(generic.data(), in.data(), a.size(), divisor);
      dividerFor(isa, type)(simd.data(), in.data(), a.size(), divisor);
      const size_t i = firstDifference(generic, simd, size);
      if (i != std::string::npos)
        ADD_FAILURE() << isaName(isa) << " vs generic, " << typeName(type) << " divide by " << divisor
                      << " element " << i << ": " << hex(a[i]) << " -> generic " << hex(elementAt(generic, i, size))
                      << ", " << isaName(isa) << " " << hex(elementAt(simd, i, size));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReduceKernelTest, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<coilDataType_t>& info) {
                           return std::string(typeName(info.param));
                         });

// A few hand-checked values, so a reference bug that mirrors a kernel bug
// cannot hide everything.
TEST(ReduceKnownValues, WrapAndNanRules) {
  for (Isa isa : availableIsas()) {
    SCOPED_TRACE(isaName(isa));
    int8_t i8a[3] = {127, -128, -7}, i8b[3] = {1, -1, 3}, i8d[3];
    kernelFor(isa, coilInt8, coilSum)(i8d, i8a, i8b, 3);
    EXPECT_EQ(i8d[0], -128);  // wraps
    EXPECT_EQ(i8d[1], 127);
    EXPECT_EQ(i8d[2], -4);
    kernelFor(isa, coilInt8, coilProd)(i8d, i8a, i8b, 3);
    EXPECT_EQ(i8d[0], 127);
    EXPECT_EQ(i8d[1], -128);  // -128 * -1 wraps to itself
    EXPECT_EQ(i8d[2], -21);
    uint64_t u64a[2] = {~uint64_t{0}, 1ull << 63}, u64b[2] = {2, 2}, u64d[2];
    kernelFor(isa, coilUint64, coilProd)(u64d, u64a, u64b, 2);
    EXPECT_EQ(u64d[0], ~uint64_t{0} - 1);
    EXPECT_EQ(u64d[1], 0u);
    kernelFor(isa, coilUint64, coilMax)(u64d, u64a, u64b, 2);
    EXPECT_EQ(u64d[0], ~uint64_t{0});  // unsigned compare, not signed
    int64_t i64a[1] = {INT64_MIN}, i64b[1] = {-1}, i64d[1];
    kernelFor(isa, coilInt64, coilMin)(i64d, i64a, i64b, 1);
    EXPECT_EQ(i64d[0], INT64_MIN);
    float fa[4] = {NAN, 1.0f, -0.0f, 2.0f}, fb[4] = {1.0f, NAN, 0.0f, 3.0f}, fd[4];
    kernelFor(isa, coilFloat32, coilMax)(fd, fa, fb, 4);
    uint32_t nanBits[2];
    std::memcpy(nanBits, fd, sizeof nanBits);
    EXPECT_EQ(nanBits[0], 0x7FC00000u);  // canonical quiet NaN, whichever side
    EXPECT_EQ(nanBits[1], 0x7FC00000u);
    EXPECT_FALSE(std::signbit(fd[2]));  // equal: b
    EXPECT_EQ(fd[3], 3.0f);
    kernelFor(isa, coilFloat32, coilMin)(fd, fa, fb, 4);
    EXPECT_TRUE(std::isnan(fd[0]) && std::isnan(fd[1]));
    EXPECT_EQ(fd[3], 2.0f);
    uint16_t ha[2] = {0x3C00, 0x7BFF}, hb[2] = {0x3C00, 0x7BFF}, hd[2];  // 1+1, 65504+65504
    kernelFor(isa, coilFloat16, coilSum)(hd, ha, hb, 2);
    EXPECT_EQ(hd[0], 0x4000);
    EXPECT_EQ(hd[1], 0x7C00);  // overflow to +Inf
    uint16_t hinf[1] = {0xFC00}, hnan[1] = {0x7D01};
    kernelFor(isa, coilFloat16, coilSum)(hd, hinf, ha, 1);
    EXPECT_EQ(hd[0], 0xFC00);  // -Inf + 1
    kernelFor(isa, coilFloat16, coilSum)(hd, hinf, hd, 1);
    EXPECT_EQ(hd[0], 0xFC00);
    kernelFor(isa, coilFloat16, coilMin)(hd, hnan, ha, 1);
    EXPECT_EQ(hd[0], 0x7E00);  // signalling NaN in, canonical quiet NaN out
    uint16_t ba[1] = {0x3F80}, bb[1] = {0x3B80}, bd[1];  // 1 + 2^-8: a tie, stays 1 (even)
    kernelFor(isa, coilBfloat16, coilSum)(bd, ba, bb, 1);
    EXPECT_EQ(bd[0], 0x3F80);
  }
}

}  // namespace
}  // namespace coil::reduce
