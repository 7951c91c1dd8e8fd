// Test inputs for the reduction kernels: deterministic random elements that
// mix special values, raw random bits and "nearby" values (so sums hit
// rounding ties), plus guarded buffers at chosen byte offsets.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "reference.h"

namespace coil::reduce::testing {

constexpr coilDataType_t kAllTypes[] = {coilInt8,    coilUint8,   coilInt32,   coilUint32,
                                        coilInt64,   coilUint64,  coilFloat16, coilFloat32,
                                        coilFloat64, coilBfloat16};
constexpr Op kAllOps[] = {Op::kSum, Op::kProd, Op::kMax, Op::kMin, Op::kBand, Op::kBor, Op::kBxor};

inline coilRedOp_t redOpOf(Op op) {
  switch (op) {
    case Op::kSum: return coilSum;
    case Op::kProd: return coilProd;
    case Op::kMax: return coilMax;
    case Op::kMin: return coilMin;
    case Op::kBand: return coilBand;
    case Op::kBor: return coilBor;
    case Op::kBxor: return coilBxor;
  }
  return coilSum;
}

/// False for a bitwise op on a float type (which has no kernel).
inline bool hasKernel(coilDataType_t t, Op op) {
  const bool bitwise = op == Op::kBand || op == Op::kBor || op == Op::kBxor;
  const ref::Kind k = ref::kindOf(t);
  return !bitwise || k == ref::Kind::kSigned || k == ref::Kind::kUnsigned;
}

/// splitmix64: small, deterministic, good enough to spread bits.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

/// Special values of each float kind, as bits: zeros, ±1, ±Inf, quiet and
/// signalling NaNs, the largest finite, the smallest subnormal and normal.
inline std::vector<uint64_t> floatSpecials(ref::Kind k) {
  switch (k) {
    case ref::Kind::kHalf:
      return {0x0000, 0x8000, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01,
              0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x0400, 0x03FF, 0x3BFF};
    case ref::Kind::kBf16:
      return {0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFA1,
              0x7F7F, 0xFF7F, 0x0001, 0x8001, 0x0080, 0x007F, 0x3F7F};
    case ref::Kind::kFloat:
      return {0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000,
              0x7FC00000, 0x7F800001, 0xFFA00001, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001,
              0x80000001, 0x00800000, 0x007FFFFF, 0x3F7FFFFF};
    default:
      return {0x0000000000000000, 0x8000000000000000, 0x3FF0000000000000, 0xBFF0000000000000,
              0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0x7FF0000000000001,
              0xFFF4000000000001, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x0000000000000001,
              0x8000000000000001, 0x0010000000000000, 0x000FFFFFFFFFFFFF, 0x3FEFFFFFFFFFFFFF};
  }
}

/// One random element of type t, as bits.
inline uint64_t randomElement(coilDataType_t t, Rng& rng) {
  const ref::Kind k = ref::kindOf(t);
  const size_t size = ref::sizeOf(t);
  const uint64_t r = rng.next();
  if (k == ref::Kind::kSigned || k == ref::Kind::kUnsigned) {
    static constexpr uint64_t kIntSpecials[] = {0, 1, ~uint64_t{0}, 0x7FFFFFFFFFFFFFFFull,
                                                0x8000000000000000ull, 2, 3};
    if (r % 4 == 0) {  // specials, truncated: 0, 1, -1/max, and the extremes of each width
      uint64_t v = kIntSpecials[(r >> 8) % 7];
      if (v >> 62) v >>= (64 - 8 * size);  // 0x7F.., 0x80.. of this width
      return ref::truncate(v, size);
    }
    return ref::truncate(rng.next(), size);
  }
  switch (r % 8) {
    case 0: {
      const auto specials = floatSpecials(k);
      return specials[(r >> 8) % specials.size()];
    }
    case 1: case 2: case 3:  // any bits: NaNs, subnormals, huge values
      return ref::truncate(rng.next(), size);
    default: {  // ±(0..4096)·2^(-8..0): sums of these often land on ties
      const double magnitude = std::ldexp(static_cast<double>((r >> 8) % 4097), -static_cast<int>((r >> 24) % 9));
      return ref::roundTo(k, (r >> 40) & 1 ? -magnitude : magnitude);
    }
  }
}

inline std::vector<uint64_t> randomElements(coilDataType_t t, size_t count, uint64_t seed) {
  Rng rng{seed};
  std::vector<uint64_t> out(count);
  for (auto& v : out) v = randomElement(t, rng);
  return out;
}

/// A byte buffer with guard bytes on both sides; elements are placed at
/// `offset` bytes past a 64-byte aligned start.
class GuardedBuffer {
 public:
  static constexpr unsigned char kGuard = 0xA5;
  static constexpr size_t kSlack = 128;

  GuardedBuffer(size_t bytes, size_t offset) : storage_(bytes + 3 * kSlack, kGuard), bytes_(bytes) {
    const auto raw = reinterpret_cast<uintptr_t>(storage_.data());
    const uintptr_t aligned = (raw + kSlack + 63) & ~uintptr_t{63};
    start_ = storage_.data() + (aligned - raw) + offset;
  }
  unsigned char* data() { return start_; }

  void write(const std::vector<uint64_t>& elements, size_t size) {
    for (size_t i = 0; i < elements.size(); ++i) std::memcpy(start_ + i * size, &elements[i], size);
  }
  uint64_t element(size_t i, size_t size) const {
    uint64_t v = 0;
    std::memcpy(&v, start_ + i * size, size);
    return v;
  }
  /// True when no byte outside [data(), data()+bytes) changed.
  bool guardsIntact() const {
    for (const unsigned char* p = storage_.data(); p < start_; ++p)
      if (*p != kGuard) return false;
    for (const unsigned char* p = start_ + bytes_; p < storage_.data() + storage_.size(); ++p)
      if (*p != kGuard) return false;
    return true;
  }

 private:
  std::vector<unsigned char> storage_;
  size_t bytes_;
  unsigned char* start_;
};

}  // namespace coil::reduce::testing
