#include "check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace coil_perf {
namespace {

uint64_t mixBits(uint64_t x) {  // splitmix64's finaliser: cheap, well spread
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool isUnsigned(Encoding e) { return e == Encoding::UnsignedInt; }
bool isFloating(Encoding e) { return e != Encoding::SignedInt && e != Encoding::UnsignedInt; }

int64_t inputValue(const TypeInfo& t, coilRedOp_t op, int rank, int nranks, size_t index) {
  const Encoding enc = t.encoding;
  const uint64_t h = mixBits((static_cast<uint64_t>(index) << 12) ^ static_cast<uint64_t>(rank));
  // Bitwise ops (integer types only): every bit of the element in play but
  // the top one, so no result equals a poison value (all ones, or the top
  // bit alone). band gets mostly ones and bor mostly zeros, so that many
  // ranks' results are neither all zeros nor all ones.
  if (isBitwise(op)) {
    const uint64_t belowTop = (uint64_t{1} << (t.size * 8 - 1)) - 1;
    const uint64_t bits = op == coilBand  ? h | mixBits(h)
                          : op == coilBor ? h & mixBits(h) & mixBits(h + 1)
                                          : h;
    return static_cast<int64_t>(bits & belowTop);
  }
  if (op == coilProd) {
    int64_t v = (rank < 6 && (h & 1)) ? 2 : 1;
    return (!isUnsigned(enc) && (h & 2)) ? -v : v;
  }
  const int64_t range = std::clamp(254 / std::max(nranks, 1), 2, 16);
  const int64_t v = static_cast<int64_t>((h >> 8) % static_cast<uint64_t>(range));
  return isUnsigned(enc) ? v : v - range / 2;
}

// Copies need no headroom for sums: 128 values, all exact in int8 and bf16.
// The salt keeps them unrelated to the reduction inputs of the same rank.
int64_t copyValue(Encoding enc, int rank, size_t index) {
  const uint64_t h = mixBits(((static_cast<uint64_t>(index) << 12) ^ static_cast<uint64_t>(rank)) +
                             0x636F70796F6E6C79ull);
  const int64_t v = static_cast<int64_t>((h >> 8) % 128);
  return isUnsigned(enc) ? v : v - 64;
}

// Keeps the low `bytes` bytes of v, read back as the type's integer
// (two's-complement wrap, as C++20 defines integer conversion).
int64_t wrapSigned(int64_t v, size_t bytes) {
  if (bytes == 8) return v;
  const unsigned bits = static_cast<unsigned>(bytes * 8);
  uint64_t u = static_cast<uint64_t>(v) & ((uint64_t{1} << bits) - 1);
  if (u >> (bits - 1)) u |= ~((uint64_t{1} << bits) - 1);
  return static_cast<int64_t>(u);
}
uint64_t wrapUnsigned(int64_t v, size_t bytes) {
  const uint64_t u = static_cast<uint64_t>(v);
  return bytes == 8 ? u : u & ((uint64_t{1} << (bytes * 8)) - 1);
}

// The element's bits for a real value (rounded to the type, nearest even).
uint64_t encodeReal(double v, const TypeInfo& t) {
  switch (t.encoding) {
    case Encoding::Float: {
      float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    }
    case Encoding::Double: {
      uint64_t b;
      std::memcpy(&b, &v, 8);
      return b;
    }
    // double -> float -> 16 bit rounds twice; for the quotients used here
    // that is innocuous (53 >= 2*24+2 and 24 >= 2*11+2).
    case Encoding::Half: return floatToHalfBits(static_cast<float>(v));
    case Encoding::Bfloat16: return floatToBf16Bits(static_cast<float>(v));
    default: break;
  }
  return 0;
}

uint64_t encodeInput(int64_t v, const TypeInfo& t) {
  return isFloating(t.encoding) ? encodeReal(static_cast<double>(v), t) : wrapUnsigned(v, t.size);
}

uint64_t expectedBits(const TypeInfo& t, coilRedOp_t op, int nranks, size_t index) {
  int64_t acc = inputValue(t, op, 0, nranks, index);
  for (int r = 1; r < nranks; ++r) {
    const int64_t v = inputValue(t, op, r, nranks, index);
    switch (op) {
      case coilProd: acc *= v; break;
      case coilMax: acc = std::max(acc, v); break;
      case coilMin: acc = std::min(acc, v); break;
      case coilBand: acc &= v; break;
      case coilBor: acc |= v; break;
      case coilBxor: acc ^= v; break;
      default: acc += v; break;  // sum, avg
    }
  }
  if (op != coilAvg) return encodeInput(acc, t);
  switch (t.encoding) {
    case Encoding::SignedInt: return wrapUnsigned(wrapSigned(acc, t.size) / nranks, t.size);
    case Encoding::UnsignedInt: return wrapUnsigned(static_cast<int64_t>(wrapUnsigned(acc, t.size) / static_cast<uint64_t>(nranks)), t.size);
    default: return encodeReal(static_cast<double>(acc) / nranks, t);
  }
}

void storeBits(void* buf, size_t index, uint64_t bits, size_t size) {
  // Little-endian hosts: the low `size` bytes are the element.
  std::memcpy(static_cast<char*>(buf) + index * size, &bits, size);
}
uint64_t loadBits(const void* buf, size_t index, size_t size) {
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(buf) + index * size, size);
  return bits;
}

}  // namespace

uint16_t floatToHalfBits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) return sign | (x > 0x7F800000u ? 0x7E00u : 0x7C00u);  // NaN, inf
  if (x >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to infinity
  if (x < 0x38800000u) {
    // Below 2^-14 the result is subnormal: count units of 2^-24. Scaling by
    // a power of two is exact; nearbyint rounds to nearest even.
    float magnitude;
    std::memcpy(&magnitude, &x, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));
  }
  // Rebias the exponent (127 -> 15) and round the mantissa's low 13 bits to
  // nearest even; a carry out of the mantissa correctly bumps the exponent.
  const uint32_t rounded = x + 0xFFFu + ((x >> 13) & 1u) - (112u << 23);
  return sign | static_cast<uint16_t>(rounded >> 13);
}

uint16_t floatToBf16Bits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

void fillInput(void* buf, size_t count, const TypeInfo& type, coilRedOp_t op, int rank,
               int nranks, size_t offset) {
  for (size_t i = 0; i < count; ++i) {
    storeBits(buf, i, encodeInput(inputValue(type, op, rank, nranks, offset + i), type),
              type.size);
  }
}

void fillCopyInput(void* buf, size_t count, const TypeInfo& type, int rank, size_t offset) {
  for (size_t i = 0; i < count; ++i) {
    storeBits(buf, i, encodeInput(copyValue(type.encoding, rank, offset + i), type), type.size);
  }
}

void poison(void* buf, size_t count, const TypeInfo& type) {
  uint64_t bits = ~uint64_t{0};  // all ones: NaN for floating types, max for unsigned
  if (type.encoding == Encoding::SignedInt) bits = uint64_t{1} << (type.size * 8 - 1);  // most negative
  for (size_t i = 0; i < count; ++i) storeBits(buf, i, bits, type.size);
}

namespace {

// Counts the elements of `result` whose bits differ from expected(i).
template <typename Expected>
WrongReport compare(const void* result, size_t count, size_t size, Expected expected) {
  WrongReport report;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t want = expected(i);
    const uint64_t got = loadBits(result, i, size);
    if (got != want) {
      if (report.count == 0) {
        report.firstIndex = i;
        report.firstGot = got;
        report.firstExpected = want;
      }
      ++report.count;
    }
  }
  return report;
}

}  // namespace

WrongReport countWrong(const void* result, size_t count, const TypeInfo& type, coilRedOp_t op,
                       int nranks, size_t offset) {
  return compare(result, count, type.size,
                 [&](size_t i) { return expectedBits(type, op, nranks, offset + i); });
}

WrongReport countWrongCopy(const void* result, size_t count, const TypeInfo& type, int sourceRank,
                           size_t offset) {
  return compare(result, count, type.size, [&](size_t i) {
    return encodeInput(copyValue(type.encoding, sourceRank, offset + i), type);
  });
}

void mergeWrong(WrongReport& total, const WrongReport& part, size_t base) {
  if (part.count == 0) return;
  if (total.count == 0) {
    total.firstIndex = base + part.firstIndex;
    total.firstGot = part.firstGot;
    total.firstExpected = part.firstExpected;
  }
  total.count += part.count;
}

}  // namespace coil_perf
