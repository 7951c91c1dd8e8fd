// GPU reduction kernels (src/device/device_reduce.cu) against the CPU
// kernels (coil::reduce::kernel / divider), bit for bit, on the same random
// inputs: every dtype × op, counts 0..1000003 (and 64 Mi float32), pointers
// misaligned by 1..15 bytes, in place, division by 1, 2, 3, 7, and both
// fp16 codecs (the default one, and the other through the testing hooks).
// Every device buffer has guard bytes on both sides, checked after each case.
//
// Runs on any machine: without a usable CUDA device it prints why and exits
// 77 (meson's "skipped"). On a mismatch it prints the case (type, op, codec,
// count, byte offsets) and up to kMaxReports elements with both inputs,
// the expected and the actual bits, in hex.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "device/cuda_diagnosis.h"
#include "device/device_reduce.h"
#include "reduce/reduce.h"

namespace {

using coil::device::testing::HalfCodec;
namespace dt = coil::device::testing;

constexpr int kMaxReports = 4;
constexpr size_t kBigCount = 1000003;

constexpr coilDataType_t kAllTypes[] = {coilInt8,    coilUint8,   coilInt32,   coilUint32,
                                        coilInt64,   coilUint64,  coilFloat16, coilFloat32,
                                        coilFloat64, coilBfloat16};
constexpr coilRedOp_t kAllOps[] = {coilSum, coilProd, coilMax, coilMin,
                                   coilAvg, coilBand, coilBor, coilBxor};

const char* codecName(HalfCodec codec) {
  return codec == HalfCodec::kHardware ? "hardware" : "software";
}

void cudaCheck(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(err) + ": " +
                             cudaGetErrorString(err));
}

// ---- inputs ------------------------------------------------------------------

/// splitmix64.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

struct FloatFormat {
  int expBits, mantBits;
};

bool isFloat(coilDataType_t t) {
  return t == coilFloat16 || t == coilFloat32 || t == coilFloat64 || t == coilBfloat16;
}

FloatFormat formatOf(coilDataType_t t) {
  switch (t) {
    case coilFloat16: return {5, 10};
    case coilBfloat16: return {8, 7};
    case coilFloat32: return {8, 23};
    default: return {11, 52};
  }
}

/// Special values as bits: zeros, ±1, ±Inf, NaNs with several payloads
/// (quiet, signalling, negative, all ones), the extremes, subnormals, fp16's
/// 65504 and its overflow neighbours, and bf16 rounding ties.
std::vector<uint64_t> specialsOf(coilDataType_t t) {
  switch (t) {
    case coilFloat16:
      return {0x0000, 0x8000, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01, 0x7FFF,
              0x7D55, 0x7BFF, 0xFBFF, 0x7BFE, 0x4C00, 0x4BFF, 0xCC00, 0x0001, 0x8001, 0x03FF,
              0x0400, 0x0200, 0x3C01, 0x1400};
    case coilBfloat16:
      return {0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFC1, 0x7FFF,
              0x7FA0, 0x7F7F, 0xFF7F, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F81, 0x3B80, 0x3BC0,
              0x477F, 0x4780};
    case coilFloat32:
      return {0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000,
              0x7FC00000, 0x7F800001, 0xFFC00001, 0x7FFFFFFF, 0x7FA00000, 0xFFFFFFFF,
              0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000,
              0x477FE000, 0x477FF000, 0xC77FF000, 0x477FEFFF, 0x3F808000, 0x3F818000,
              0x4B800000, 0x33800000, 0x3F800001};
    default:
      return {0x0000000000000000, 0x8000000000000000, 0x3FF0000000000000, 0xBFF0000000000000,
              0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0x7FF0000000000001,
              0xFFF8000000000001, 0x7FFFFFFFFFFFFFFF, 0x7FF4000000000000, 0x7FEFFFFFFFFFFFFF,
              0xFFEFFFFFFFFFFFFF, 0x0000000000000001, 0x8000000000000001, 0x000FFFFFFFFFFFFF,
              0x0010000000000000, 0x40EFFC0000000000, 0x40EFFE0000000000, 0x3FF0000000000001};
  }
}

/// One random element of type t, as bits (low bytes used).
uint64_t randomElement(coilDataType_t t, const std::vector<uint64_t>& specials, Rng& rng) {
  const size_t size = coil::reduce::typeSize(t);
  const uint64_t mask = size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
  const uint64_t r = rng.next();
  if (!isFloat(t)) {
    if (r % 4 == 0) {  // 0, 1, -1/max, the signed extremes
      static constexpr uint64_t kInts[] = {0, 1, ~uint64_t{0}, 2, 3};
      const uint64_t pick = (r >> 8) % 7;
      if (pick < 5) return kInts[pick] & mask;
      const uint64_t top = uint64_t{1} << (8 * size - 1);
      return (pick == 5 ? top : top - 1) & mask;
    }
    return rng.next() & mask;
  }
  const FloatFormat f = formatOf(t);
  const int bias = (1 << (f.expBits - 1)) - 1;
  const int maxExp = (1 << f.expBits) - 2;
  switch (r % 16) {
    case 0: case 1:
      return specials[(r >> 8) % specials.size()];
    case 2: case 3: case 4: case 5:  // any bits: NaNs, subnormals, huge values
      return rng.next() & mask;
    default: {
      // Nearby values (exponents within ±2 of a centre): sums and products
      // of them often land on rounding ties. Centres: 1.0, the smallest
      // normals (differences become subnormal), the largest (overflow).
      int centre = bias;
      if (r % 16 == 6) centre = 2;
      else if (r % 16 == 7) centre = maxExp - 2;
      const int exponent = centre + static_cast<int>((r >> 8) % 5) - 2;
      uint64_t mantissa = rng.next() & ((uint64_t{1} << f.mantBits) - 1);
      if ((r >> 16) % 4 == 0) mantissa &= ~((uint64_t{1} << (f.mantBits / 2)) - 1);  // short mantissas
      const uint64_t sign = (r >> 20) & 1;
      return (sign << (f.expBits + f.mantBits)) | (static_cast<uint64_t>(exponent) << f.mantBits) |
             mantissa;
    }
  }
}

std::vector<unsigned char> randomBytes(coilDataType_t t, size_t count, uint64_t seed) {
  const size_t size = coil::reduce::typeSize(t);
  const auto specials = isFloat(t) ? specialsOf(t) : std::vector<uint64_t>{};
  Rng rng{seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(t) * 1000003u + count};
  std::vector<unsigned char> out(count * size);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t v = randomElement(t, specials, rng);
    std::memcpy(out.data() + i * size, &v, size);  // little-endian: the low bytes
  }
  return out;
}

// ---- device buffers with guards ---------------------------------------------------

constexpr unsigned char kGuard = 0xA5;

/// cudaMalloc'd bytes with 64 guard bytes before and at least 64 after the
/// data, which starts `offset` (0..15) bytes past a 64-byte boundary.
class DeviceBuffer {
 public:
  static constexpr size_t kSlack = 64;
  DeviceBuffer(size_t bytes, size_t offset) : bytes_(bytes), offset_(offset), total_(bytes + 2 * kSlack + 16) {
    cudaCheck(cudaMalloc(&base_, total_), "cudaMalloc");
    cudaCheck(cudaMemset(base_, kGuard, total_), "cudaMemset");
  }
  ~DeviceBuffer() { cudaFree(base_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  unsigned char* data() const { return base_ + kSlack + offset_; }
  void upload(const std::vector<unsigned char>& bytes) {
    if (!bytes.empty()) cudaCheck(cudaMemcpy(data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "upload");
  }
  /// The data bytes; `guardsOk` says whether every byte around them is intact.
  std::vector<unsigned char> download(bool* guardsOk) const {
    std::vector<unsigned char> data(bytes_);
    if (bytes_ != 0) cudaCheck(cudaMemcpy(data.data(), this->data(), bytes_, cudaMemcpyDeviceToHost), "download");
    const size_t before = kSlack + offset_, after = total_ - before - bytes_;
    std::vector<unsigned char> guards(before + after);
    cudaCheck(cudaMemcpy(guards.data(), base_, before, cudaMemcpyDeviceToHost), "download");
    cudaCheck(cudaMemcpy(guards.data() + before, this->data() + bytes_, after, cudaMemcpyDeviceToHost), "download");
    *guardsOk = std::all_of(guards.begin(), guards.end(), [](unsigned char c) { return c == kGuard; });
    return data;
  }

 private:
  unsigned char* base_ = nullptr;
  size_t bytes_, offset_, total_;
};

// ---- comparison -------------------------------------------------------------------

std::string hexElement(const unsigned char* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);
  char text[32];
  std::snprintf(text, sizeof text, "0x%0*" PRIx64, static_cast<int>(2 * size), v);
  return text;
}

/// Compares device output with the CPU's, element by element.
::testing::AssertionResult compare(const std::string& label, coilDataType_t type,
                                   const std::vector<unsigned char>& a,
                                   const std::vector<unsigned char>* b,
                                   const std::vector<unsigned char>& expected,
                                   const std::vector<unsigned char>& actual, bool guardsOk) {
  if (guardsOk && expected == actual) return ::testing::AssertionSuccess();
  const size_t size = coil::reduce::typeSize(type);
  const size_t count = expected.size() / size;
  size_t bad = 0;
  std::ostringstream report;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(expected.data() + i * size, actual.data() + i * size, size) == 0) continue;
    if (++bad <= kMaxReports) {
      report << "\n    [" << i << "] a=" << hexElement(a.data() + i * size, size);
      if (b != nullptr) report << " b=" << hexElement(b->data() + i * size, size);
      report << " expected=" << hexElement(expected.data() + i * size, size)
             << " actual=" << hexElement(actual.data() + i * size, size);
    }
  }
  if (bad == 0 && guardsOk) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure() << label << ": ";
  if (bad != 0) failure << bad << " of " << count << " elements differ" << report.str();
  if (!guardsOk) failure << (bad != 0 ? "\n    " : "") << "bytes outside the destination were written";
  return failure;
}

struct Offsets {
  size_t dst = 0, a = 0, b = 0;
};

enum class Alias { kNone, kDstIsA, kDstIsB };

std::string describe(const char* what, coilDataType_t type, const char* op, HalfCodec codec,
                     size_t count, Offsets off, Alias alias) {
  std::ostringstream os;
  os << what << " " << coil::reduce::typeName(type) << " " << op;
  if (type == coilFloat16) os << " (fp16 codec " << codecName(codec) << ")";
  os << " count=" << count << " offsets dst/a/b=" << off.dst << "/" << off.a << "/" << off.b;
  if (alias == Alias::kDstIsA) os << " in place (dst == a)";
  if (alias == Alias::kDstIsB) os << " in place (dst == b)";
  return os.str();
}

/// One reduce case: device vs CPU on the given inputs.
::testing::AssertionResult checkReduce(coilDataType_t type, coilRedOp_t op, HalfCodec codec,
                                       const std::vector<unsigned char>& a,
                                       const std::vector<unsigned char>& b, Offsets off,
                                       Alias alias = Alias::kNone, cudaStream_t stream = nullptr) {
  const size_t size = coil::reduce::typeSize(type);
  const size_t count = a.size() / size;
  if (alias == Alias::kDstIsA) off.dst = off.a;
  if (alias == Alias::kDstIsB) off.dst = off.b;
  const std::string label = describe("reduce", type, coil::reduce::opName(op), codec, count, off, alias);

  std::vector<unsigned char> expected(a.size());
  coil::reduce::kernel(type, op)(expected.data(), a.data(), b.data(), count);

  DeviceBuffer da(a.size(), off.a), db(b.size(), off.b);
  da.upload(a);
  db.upload(b);
  std::vector<unsigned char> actual;
  bool guardsOk = false;
  try {
    if (alias == Alias::kNone) {
      DeviceBuffer dd(a.size(), off.dst);
      dt::reduceAsyncWith(codec, dd.data(), da.data(), db.data(), count, type, op, stream);
      cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      actual = dd.download(&guardsOk);
    } else {
      DeviceBuffer& dd = alias == Alias::kDstIsA ? da : db;
      dt::reduceAsyncWith(codec, dd.data(), da.data(), db.data(), count, type, op, stream);
      cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      actual = dd.download(&guardsOk);
      bool otherOk = false;
      const auto other = (alias == Alias::kDstIsA ? db : da).download(&otherOk);
      if (other != (alias == Alias::kDstIsA ? b : a) || !otherOk)
        return ::testing::AssertionFailure() << label << ": the source that is not dst changed";
    }
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << label << ": threw: " << e.what();
  }
  return compare(label, type, a, &b, expected, actual, guardsOk);
}

/// One divide case.
::testing::AssertionResult checkDivide(coilDataType_t type, int divisor, HalfCodec codec,
                                       const std::vector<unsigned char>& src, Offsets off,
                                       bool inPlace, cudaStream_t stream = nullptr) {
  const size_t size = coil::reduce::typeSize(type);
  const size_t count = src.size() / size;
  if (inPlace) off.dst = off.a;
  const std::string label =
      describe("divide", type, ("by " + std::to_string(divisor)).c_str(), codec, count, off,
               inPlace ? Alias::kDstIsA : Alias::kNone);

  std::vector<unsigned char> expected(src.size());
  coil::reduce::divider(type)(expected.data(), src.data(), count, divisor);

  DeviceBuffer ds(src.size(), off.a);
  ds.upload(src);
  std::vector<unsigned char> actual;
  bool guardsOk = false;
  try {
    if (inPlace) {
      dt::divideAsyncWith(codec, ds.data(), ds.data(), count, type, divisor, stream);
      cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      actual = ds.download(&guardsOk);
    } else {
      DeviceBuffer dd(src.size(), off.dst);
      dt::divideAsyncWith(codec, dd.data(), ds.data(), count, type, divisor, stream);
      cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      actual = dd.download(&guardsOk);
      bool srcOk = false;
      if (ds.download(&srcOk) != src || !srcOk)
        return ::testing::AssertionFailure() << label << ": the source changed";
    }
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << label << ": threw: " << e.what();
  }
  return compare(label, type, src, nullptr, expected, actual, guardsOk);
}

/// One chain case: reduceChainAsync over `inputs` (input q at byte offset
/// offsets[q] past its buffer's boundary) against the CPU kernel applied
/// pairwise in order. `inPlace`: dst is input `inPlaceSource`'s buffer.
::testing::AssertionResult checkChain(coilDataType_t type, coilRedOp_t op, HalfCodec codec,
                                      const std::vector<std::vector<unsigned char>>& inputs,
                                      const std::vector<size_t>& offsets, size_t dstOffset,
                                      bool inPlace, cudaStream_t stream = nullptr,
                                      int inPlaceSource = 0) {
  const size_t size = coil::reduce::typeSize(type);
  const size_t count = inputs[0].size() / size;
  const int n = static_cast<int>(inputs.size());
  std::ostringstream label;
  label << "chain of " << n << " " << coil::reduce::typeName(type) << " "
        << coil::reduce::opName(op) << " count=" << count << " offsets";
  for (size_t o : offsets) label << " " << o;
  label << (inPlace ? " in place into source " + std::to_string(inPlaceSource)
                    : " dst offset " + std::to_string(dstOffset));
  if (type == coilFloat16) label << " (fp16 codec " << codecName(codec) << ")";

  std::vector<unsigned char> expected(inputs[0].size());
  const auto fn = coil::reduce::kernel(type, op);
  fn(expected.data(), inputs[0].data(), inputs[1].data(), count);
  for (int q = 2; q < n; ++q) fn(expected.data(), expected.data(), inputs[q].data(), count);

  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<const void*> sources;
  for (int q = 0; q < n; ++q) {
    buffers.push_back(std::make_unique<DeviceBuffer>(inputs[q].size(), offsets[q]));
    buffers.back()->upload(inputs[q]);
    sources.push_back(buffers.back()->data());
  }
  std::vector<unsigned char> actual;
  bool guardsOk = false;
  try {
    DeviceBuffer out(inputs[0].size(), dstOffset);
    DeviceBuffer& dst = inPlace ? *buffers[static_cast<size_t>(inPlaceSource)] : out;
    dt::reduceChainAsyncWith(codec, dst.data(), sources.data(), n, count, type, op, stream);
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    actual = dst.download(&guardsOk);
    for (int q = 0; q < n; ++q) {
      if (inPlace && q == inPlaceSource) continue;
      bool ok = false;
      if (buffers[q]->download(&ok) != inputs[q] || !ok)
        return ::testing::AssertionFailure() << label.str() << ": source " << q << " changed";
    }
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << label.str() << ": threw: " << e.what();
  }
  return compare(label.str(), type, inputs[0], &inputs[1], expected, actual, guardsOk);
}

// ---- per-type suites ----------------------------------------------------------------

struct Param {
  coilDataType_t type;
  HalfCodec codec;
};

std::vector<Param> allParams() {
  std::vector<Param> params;
  const HalfCodec other = dt::defaultHalfCodec() == HalfCodec::kHardware ? HalfCodec::kSoftware
                                                                          : HalfCodec::kHardware;
  for (coilDataType_t t : kAllTypes) {
    params.push_back({t, dt::defaultHalfCodec()});
    if (t == coilFloat16) params.push_back({t, other});
  }
  return params;
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  std::string name = coil::reduce::typeName(info.param.type);
  if (info.param.type == coilFloat16)
    name += info.param.codec == HalfCodec::kHardware ? "_hardware" : "_software";
  return name;
}

class DeviceReduce : public ::testing::TestWithParam<Param> {
 protected:
  coilDataType_t type() const { return GetParam().type; }
  HalfCodec codec() const { return GetParam().codec; }
};

TEST_P(DeviceReduce, EveryOpAndCount) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{17}, kBigCount}) {
    const auto a = randomBytes(type(), count, 1);
    const auto b = randomBytes(type(), count, 2);
    for (coilRedOp_t op : kAllOps) {
      if (coil::reduce::takesType(op, type())) {  // no bitwise op on a float type
        EXPECT_TRUE(checkReduce(type(), op, codec(), a, b, Offsets{}));
      }
    }
  }
}

TEST_P(DeviceReduce, MisalignedPointers) {
  cudaStream_t stream = nullptr;
  cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  // 4099 elements: a scalar head, vectors and a tail on the vector path.
  const auto a = randomBytes(type(), 4099, 3);
  const auto b = randomBytes(type(), 4099, 4);
  for (size_t k = 1; k < 16; ++k) {
    const Offsets same{k, k, k};                             // vector path when k % size == 0
    const Offsets mixed{(k * 3) % 16, k, (k + 5) % 16};      // scalar path
    const Offsets oneOff{0, 0, k};                           // only b misaligned
    for (coilRedOp_t op : {coilSum, coilProd, coilMax, coilMin}) {
      EXPECT_TRUE(checkReduce(type(), op, codec(), a, b, same, Alias::kNone, stream));
      EXPECT_TRUE(checkReduce(type(), op, codec(), a, b, mixed, Alias::kNone, stream));
      EXPECT_TRUE(checkReduce(type(), op, codec(), a, b, oneOff, Alias::kNone, stream));
    }
  }
  // Large counts on the scalar paths (several grid-stride rounds).
  const auto bigA = randomBytes(type(), kBigCount, 5);
  const auto bigB = randomBytes(type(), kBigCount, 6);
  EXPECT_TRUE(checkReduce(type(), coilSum, codec(), bigA, bigB, Offsets{1, 1, 1}, Alias::kNone, stream));
  EXPECT_TRUE(checkReduce(type(), coilMax, codec(), bigA, bigB, Offsets{8, 0, 8}, Alias::kNone, stream));
  EXPECT_TRUE(checkReduce(type(), coilProd, codec(), bigA, bigB, Offsets{2, 2, 2}, Alias::kNone, stream));
  cudaStreamDestroy(stream);
}

TEST_P(DeviceReduce, InPlace) {
  for (size_t count : {size_t{17}, kBigCount}) {
    const auto a = randomBytes(type(), count, 7);
    const auto b = randomBytes(type(), count, 8);
    for (coilRedOp_t op : {coilSum, coilProd, coilMax, coilMin}) {
      EXPECT_TRUE(checkReduce(type(), op, codec(), a, b, Offsets{}, Alias::kDstIsA));
      EXPECT_TRUE(checkReduce(type(), op, codec(), a, b, Offsets{}, Alias::kDstIsB));
      EXPECT_TRUE(checkReduce(type(), op, codec(), a, b, Offsets{0, 3, 3}, Alias::kDstIsA));
      EXPECT_TRUE(checkReduce(type(), op, codec(), a, b, Offsets{0, 8, 8}, Alias::kDstIsB));
    }
  }
}

TEST_P(DeviceReduce, Divide) {
  for (int divisor : {1, 2, 3, 7}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{17}, kBigCount}) {
      const auto src = randomBytes(type(), count, 9);
      EXPECT_TRUE(checkDivide(type(), divisor, codec(), src, Offsets{}, false));
    }
    const auto src = randomBytes(type(), 4099, 10);
    EXPECT_TRUE(checkDivide(type(), divisor, codec(), src, Offsets{}, true));
    EXPECT_TRUE(checkDivide(type(), divisor, codec(), src, Offsets{5, 5, 0}, true));
    EXPECT_TRUE(checkDivide(type(), divisor, codec(), src, Offsets{8, 8, 0}, false));
    EXPECT_TRUE(checkDivide(type(), divisor, codec(), src, Offsets{3, 11, 0}, false));
    EXPECT_TRUE(checkDivide(type(), divisor, codec(), src, Offsets{0, 1, 0}, false));
  }
  // Larger divisors (the rank count of a big job), once each.
  const auto src = randomBytes(type(), 4099, 11);
  for (int divisor : {1000, 16777217, 2147483647})
    EXPECT_TRUE(checkDivide(type(), divisor, codec(), src, Offsets{}, false));
}

// The one-pass chain (the peer windows' reduceToSlot) is the pairwise chain
// bit for bit: 2 to 17 sources (17: three launches of at most 8), every op,
// counts 0 to 1000003, on the vector path (all pointers equally misaligned),
// the scalar path (mixed offsets), the byte path (misaligned elements), and
// in place into source 0; chains of one launch also in place into their
// last source (a rank's own term in the registered all-reduce).
TEST_P(DeviceReduce, ChainEqualsPairwise) {
  for (int n : {2, 3, 5, 9, 17}) {
    for (size_t count : {size_t{0}, size_t{3}, size_t{4099}}) {
      std::vector<std::vector<unsigned char>> in;
      for (int q = 0; q < n; ++q) in.push_back(randomBytes(type(), count, 100 + q));
      const std::vector<size_t> zero(n, 0), same(n, 8);
      std::vector<size_t> mixed, bytes;
      for (int q = 0; q < n; ++q) {
        mixed.push_back((q * 4) % 16);
        bytes.push_back((q * 3 + 1) % 16);
      }
      for (coilRedOp_t op : kAllOps) {
        if (!coil::reduce::takesType(op, type())) continue;
        EXPECT_TRUE(checkChain(type(), op, codec(), in, zero, 0, false));
        if (count < 4099) continue;  // the layouts need a head, vectors and a tail
        EXPECT_TRUE(checkChain(type(), op, codec(), in, same, 8, false));
        EXPECT_TRUE(checkChain(type(), op, codec(), in, mixed, 4, false));
        EXPECT_TRUE(checkChain(type(), op, codec(), in, bytes, 5, false));
        EXPECT_TRUE(checkChain(type(), op, codec(), in, zero, 0, true));
        if (n <= coil::device::kChainSourcesPerLaunch) {
          EXPECT_TRUE(checkChain(type(), op, codec(), in, same, 8, true, nullptr, n - 1));
        }
      }
    }
  }
  for (int n : {4, 9}) {
    std::vector<std::vector<unsigned char>> in;
    for (int q = 0; q < n; ++q) in.push_back(randomBytes(type(), kBigCount, 200 + q));
    EXPECT_TRUE(checkChain(type(), coilSum, codec(), in, std::vector<size_t>(n, 0), 0, false));
    EXPECT_TRUE(checkChain(type(), coilMax, codec(), in, std::vector<size_t>(n, 2), 2, true));
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DeviceReduce, ::testing::ValuesIn(allParams()), paramName);

// 64 Mi float32 elements (256 MiB a buffer): many grid-stride rounds.
TEST(DeviceReduceLarge, Float32SixtyFourMi) {
  const size_t count = size_t{64} << 20;
  const auto a = randomBytes(coilFloat32, count, 12);
  const auto b = randomBytes(coilFloat32, count, 13);
  for (coilRedOp_t op : {coilSum, coilProd, coilMax, coilMin})
    EXPECT_TRUE(checkReduce(coilFloat32, op, dt::defaultHalfCodec(), a, b, Offsets{}));
  EXPECT_TRUE(checkDivide(coilFloat32, 3, dt::defaultHalfCodec(), a, Offsets{}, false));
}

// ---- the conversions on the device ---------------------------------------------------

/// fp32 bit patterns around every rounding tie of fp16 (normal and
/// subnormal results) and bf16, edges and random bits (as in
/// device_convert_test.cc).
std::vector<uint32_t> narrowingInputs() {
  std::vector<uint32_t> v;
  for (uint32_t prefix = 0; prefix < (1u << 19); ++prefix)
    for (uint32_t low : {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x1FFFu}) v.push_back((prefix << 13) | low);
  for (uint32_t prefix = 0; prefix < (1u << 16); ++prefix)
    for (uint32_t low : {0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) v.push_back((prefix << 16) | low);
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t e = 100; e <= 113; ++e) {
      const uint32_t tieBit = 125 - e;
      if (tieBit > 23) {
        for (uint32_t m : {0u, 1u, 0x400000u, 0x7FFFFFu}) v.push_back(sign | (e << 23) | m);
        continue;
      }
      const uint32_t tie = 1u << tieBit;
      for (uint32_t upper = 0; upper < (1u << (23 - tieBit)); ++upper)
        for (uint32_t low : {0u, 1u, tie - 1, tie, tie + 1, 2 * tie - 1})
          v.push_back(sign | (e << 23) | (((upper << (tieBit + 1)) | low) & 0x7FFFFFu));
    }
  }
  Rng rng{0xC0DEC};
  for (int i = 0; i < 2000000; ++i) v.push_back(static_cast<uint32_t>(rng.next()));
  for (uint64_t x = 0; x <= 0xFFFFFFFFull; x += 65521) v.push_back(static_cast<uint32_t>(x));
  return v;
}

bool halfIsNan(uint16_t h) { return (h & 0x7FFFu) > 0x7C00u; }
bool f32IsNan(uint32_t f) { return (f & 0x7FFFFFFFu) > 0x7F800000u; }

class DeviceConvert : public ::testing::TestWithParam<HalfCodec> {};

TEST_P(DeviceConvert, WidenEvery16BitValue) {
  const HalfCodec codec = GetParam();
  std::vector<uint16_t> in(65536);
  for (uint32_t i = 0; i < 65536; ++i) in[i] = static_cast<uint16_t>(i);
  uint16_t* dIn = nullptr;
  uint32_t* dOut = nullptr;
  cudaCheck(cudaMalloc(&dIn, in.size() * 2), "cudaMalloc");
  cudaCheck(cudaMalloc(&dOut, in.size() * 4), "cudaMalloc");
  cudaCheck(cudaMemcpy(dIn, in.data(), in.size() * 2, cudaMemcpyHostToDevice), "upload");
  for (coilDataType_t type : {coilFloat16, coilBfloat16}) {
    std::vector<uint32_t> out(in.size());
    dt::widenAsync(codec, dOut, dIn, in.size(), type, nullptr);
    cudaCheck(cudaMemcpy(out.data(), dOut, out.size() * 4, cudaMemcpyDeviceToHost), "download");
    int bad = 0;
    for (uint32_t i = 0; i < 65536; ++i) {
      const auto h = static_cast<uint16_t>(i);
      const float wantF = type == coilFloat16 ? coil::reduce::halfToFloat(h) : coil::reduce::bf16ToFloat(h);
      uint32_t want;
      std::memcpy(&want, &wantF, 4);
      // The hardware fp16 widening only has to keep a NaN a NaN.
      const bool ok = (type == coilFloat16 && codec == HalfCodec::kHardware && halfIsNan(h))
                          ? f32IsNan(out[i])
                          : out[i] == want;
      if (!ok && ++bad <= 8)
        ADD_FAILURE() << "widen " << coil::reduce::typeName(type) << " codec " << codecName(codec)
                      << ": input " << hexElement(reinterpret_cast<const unsigned char*>(&in[i]), 2)
                      << " expected " << hexElement(reinterpret_cast<const unsigned char*>(&want), 4)
                      << " actual " << hexElement(reinterpret_cast<const unsigned char*>(&out[i]), 4);
    }
    EXPECT_EQ(bad, 0) << "widen " << coil::reduce::typeName(type) << " codec " << codecName(codec);
  }
  cudaFree(dIn);
  cudaFree(dOut);
}

TEST_P(DeviceConvert, NarrowAroundEveryTie) {
  const HalfCodec codec = GetParam();
  const auto in = narrowingInputs();
  uint32_t* dIn = nullptr;
  uint16_t* dOut = nullptr;
  cudaCheck(cudaMalloc(&dIn, in.size() * 4), "cudaMalloc");
  cudaCheck(cudaMalloc(&dOut, in.size() * 2), "cudaMalloc");
  cudaCheck(cudaMemcpy(dIn, in.data(), in.size() * 4, cudaMemcpyHostToDevice), "upload");
  for (coilDataType_t type : {coilFloat16, coilBfloat16}) {
    std::vector<uint16_t> out(in.size());
    dt::narrowAsync(codec, dOut, dIn, in.size(), type, nullptr);
    cudaCheck(cudaMemcpy(out.data(), dOut, out.size() * 2, cudaMemcpyDeviceToHost), "download");
    size_t bad = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      float f;
      std::memcpy(&f, &in[i], 4);
      uint16_t want = type == coilFloat16 ? coil::reduce::floatToHalf(f) : coil::reduce::floatToBf16(f);
      // The hardware fp16 narrowing writes the kernels' canonical NaN.
      if (type == coilFloat16 && codec == HalfCodec::kHardware && f32IsNan(in[i])) want = 0x7E00;
      if (out[i] != want && ++bad <= 8)
        ADD_FAILURE() << "narrow to " << coil::reduce::typeName(type) << " codec " << codecName(codec)
                      << ": input " << hexElement(reinterpret_cast<const unsigned char*>(&in[i]), 4)
                      << " expected " << hexElement(reinterpret_cast<const unsigned char*>(&want), 2)
                      << " actual " << hexElement(reinterpret_cast<const unsigned char*>(&out[i]), 2);
    }
    EXPECT_EQ(bad, 0u) << "narrow to " << coil::reduce::typeName(type) << " codec " << codecName(codec)
                       << ", " << in.size() << " inputs";
  }
  cudaFree(dIn);
  cudaFree(dOut);
}

INSTANTIATE_TEST_SUITE_P(BothCodecs, DeviceConvert,
                         ::testing::Values(HalfCodec::kHardware, HalfCodec::kSoftware),
                         [](const ::testing::TestParamInfo<HalfCodec>& info) {
                           return std::string(codecName(info.param));
                         });

// ---- argument errors ---------------------------------------------------------------------

/// Runs fn, which must throw coil::Error with `code`; prints the message.
template <class Fn>
::testing::AssertionResult throwsCode(coilResult_t code, const char* what, Fn fn) {
  try {
    fn();
  } catch (const coil::Error& e) {
    std::printf("  %s -> %s (code %d)\n", what, e.what(), static_cast<int>(e.code()));
    if (e.code() == code) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": code " << static_cast<int>(e.code()) << " ("
                                         << e.what() << "), expected " << static_cast<int>(code);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << what << ": threw a non-coil exception: " << e.what();
  }
  return ::testing::AssertionFailure() << what << ": did not throw";
}

TEST(DeviceReduceErrors, InvalidArgumentsThrowBeforeLaunching) {
  void* buf = nullptr;
  cudaCheck(cudaMalloc(&buf, 64), "cudaMalloc");
  const auto badType = static_cast<coilDataType_t>(coilNumTypes);
  const auto negType = static_cast<coilDataType_t>(-1);
  const auto badOp = static_cast<coilRedOp_t>(coilNumOps);
  const auto negOp = static_cast<coilRedOp_t>(-1);
  using coil::device::divideAsync;
  using coil::device::reduceAsync;
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "reduce type 10",
                         [&] { reduceAsync(buf, buf, buf, 4, badType, coilSum, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "reduce type -1 count 0",
                         [&] { reduceAsync(buf, buf, buf, 0, negType, coilSum, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "reduce op 5",
                         [&] { reduceAsync(buf, buf, buf, 4, coilFloat32, badOp, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "reduce op -1",
                         [&] { reduceAsync(buf, buf, buf, 4, coilInt8, negOp, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "reduce op coilMaxRedOp",
                         [&] { reduceAsync(buf, buf, buf, 4, coilInt8, coilMaxRedOp, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "bxor of float32",
                         [&] { reduceAsync(buf, buf, buf, 4, coilFloat32, coilBxor, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "band of bfloat16 count 0",
                         [&] { reduceAsync(buf, buf, buf, 0, coilBfloat16, coilBand, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "divide type 10",
                         [&] { divideAsync(buf, buf, 4, badType, 2, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "divide by 0",
                         [&] { divideAsync(buf, buf, 4, coilFloat32, 0, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "divide by -3 count 0",
                         [&] { divideAsync(buf, buf, 0, coilInt32, -3, nullptr); }));
  const void* two[2] = {buf, buf};
  const void* withNull[3] = {buf, nullptr, buf};
  using coil::device::reduceChainAsync;
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "chain of 1",
                         [&] { reduceChainAsync(buf, two, 1, 4, coilFloat32, coilSum, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "chain with a NULL source",
                         [&] { reduceChainAsync(buf, withNull, 3, 4, coilFloat32, coilSum, nullptr); }));
  const void* nine[9] = {buf, buf, buf, buf, buf, buf, buf, buf, buf};
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "chain of two launches whose dst is source 1",
                         [&] { reduceChainAsync(buf, nine, 9, 4, coilFloat32, coilSum, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "chain op 5",
                         [&] { reduceChainAsync(nullptr, two, 2, 4, coilFloat32, badOp, nullptr); }));
  EXPECT_TRUE(throwsCode(coilInvalidArgument, "widen int32",
                         [&] { dt::widenAsync(HalfCodec::kHardware, static_cast<uint32_t*>(buf),
                                              static_cast<uint16_t*>(buf), 4, coilInt32, nullptr); }));
  // Nothing was enqueued, and no CUDA error is pending.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaFree(buf);
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("gpu suite: skipped: no usable CUDA device (%s)\n",
                coil::device::describeCudaUnusable(err, devices).c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  int device = 0, runtime = 0, driver = 0;
  cudaGetDevice(&device);
  cudaGetDeviceProperties(&prop, device);
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("gpu suite: device %d of %d: %s, sm_%d%d, %d SMs, %.1f GiB; CUDA runtime %d, driver %d\n",
              device, devices, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              static_cast<double>(prop.totalGlobalMem) / (1 << 30), runtime, driver);
  std::printf("gpu suite: CPU reference kernels: %s; device fp16 codec: %s\n",
              coil::reduce::activeIsa(), codecName(coil::device::testing::defaultHalfCodec()));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
