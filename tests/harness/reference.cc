#include "harness/reference.h"

#include <cstring>
#include <stdexcept>

namespace coil::test {

size_t sizeOf(coilDataType_t t) {
  switch (t) {
    case coilInt8: case coilUint8: return 1;
    case coilFloat16: case coilBfloat16: return 2;
    case coilInt32: case coilUint32: case coilFloat32: return 4;
    case coilInt64: case coilUint64: case coilFloat64: return 8;
    default: throw std::invalid_argument("bad type");
  }
}

const char* nameOf(coilDataType_t t) {
  static const char* names[] = {"int8",  "uint8",   "int32",   "uint32",  "int64",
                                "uint64", "float16", "float32", "float64", "bfloat16"};
  return names[t];
}

const char* nameOf(coilRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
  return names[op];
}

bool isBitwiseOp(coilRedOp_t op) { return op == coilBand || op == coilBor || op == coilBxor; }

bool isIntegerType(coilDataType_t t) {
  switch (t) {
    case coilInt8: case coilUint8: case coilInt32: case coilUint32: case coilInt64:
    case coilUint64: return true;
    default: return false;
  }
}

bool opTakesType(coilRedOp_t op, coilDataType_t t) { return !isBitwiseOp(op) || isIntegerType(t); }

namespace {

// fp16 bits of an integer |v| < 2048, built from sign/exponent/mantissa by
// hand (independent of coil's conversion code).
uint16_t halfBitsOfInt(int64_t v) {
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  uint64_t m = static_cast<uint64_t>(v < 0 ? -v : v);
  if (m >= 2048) throw std::invalid_argument("not exact in fp16");
  int e = 63 - __builtin_clzll(m);              // m = 1.f * 2^e
  uint64_t frac = (m << (10 - e)) & 0x3FF;      // 10 fraction bits
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | frac);
}

uint16_t bf16BitsOfInt(int64_t v) {
  float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (bits & 0xFFFF) throw std::invalid_argument("not exact in bf16");
  return static_cast<uint16_t>(bits >> 16);
}

template <typename T>
void put(void* buf, size_t i, T v) {
  std::memcpy(static_cast<uint8_t*>(buf) + i * sizeof(T), &v, sizeof(T));
}

// Wraps a mathematically exact integer the way the type's arithmetic does.
int64_t wrap(coilDataType_t t, int64_t v) {
  switch (t) {
    case coilInt8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case coilUint8: return static_cast<uint8_t>(v);
    case coilInt32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    case coilUint32: return static_cast<uint32_t>(v);
    default: return v;  // 64-bit ints never overflow with our inputs; floats are exact
  }
}

bool isUnsigned(coilDataType_t t) { return t == coilUint8 || t == coilUint32 || t == coilUint64; }

}  // namespace

void storeInt(coilDataType_t t, void* buf, size_t i, int64_t v) {
  switch (t) {
    case coilInt8: put<int8_t>(buf, i, static_cast<int8_t>(v)); break;
    case coilUint8: put<uint8_t>(buf, i, static_cast<uint8_t>(v)); break;
    case coilInt32: put<int32_t>(buf, i, static_cast<int32_t>(v)); break;
    case coilUint32: put<uint32_t>(buf, i, static_cast<uint32_t>(v)); break;
    case coilInt64: put<int64_t>(buf, i, v); break;
    case coilUint64: put<uint64_t>(buf, i, static_cast<uint64_t>(v)); break;
    case coilFloat16: put<uint16_t>(buf, i, halfBitsOfInt(v)); break;
    case coilBfloat16: put<uint16_t>(buf, i, bf16BitsOfInt(v)); break;
    case coilFloat32: put<float>(buf, i, static_cast<float>(v)); break;
    case coilFloat64: put<double>(buf, i, static_cast<double>(v)); break;
    default: throw std::invalid_argument("bad type");
  }
}

// sum/avg: v(i) + d_r with sum_r d_r = 0, so the sum is n*v(i) and the
// average v(i), while every rank's contribution still matters.
// max/min: a spread of values; prod: mostly 1, some 2 and -1 (powers of two
// stay exact; 8 ranks multiply to at most 2^8).
int64_t inputValue(coilRedOp_t op, int r, int n, size_t i) {
  switch (op) {
    case coilSum:
    case coilAvg: {
      int64_t v = static_cast<int64_t>((i * 7 + 3) % 8);
      int64_t d = (r < n - 1) ? r : -static_cast<int64_t>(n - 1) * (n - 2) / 2;
      return v + d;
    }
    case coilMax:
    case coilMin: return static_cast<int64_t>((i * 13 + static_cast<size_t>(r) * 7) % 23);
    case coilProd: {
      size_t k = (i + static_cast<size_t>(r) * 3) % 7;
      return k == 0 ? 2 : (k == 4 ? -1 : 1);
    }
    // The bitwise ops: 7-bit values (every integer type holds them), each
    // rank's different. band: all ones but a bit or none cleared; bor: one
    // bit or none set; bxor: any 7 bits.
    case coilBand: return 0x7F & ~(int64_t{1} << ((i + static_cast<size_t>(r) * 3) % 9));
    case coilBor: return 0x7F & (int64_t{1} << ((i * 5 + static_cast<size_t>(r) * 3) % 9));
    case coilBxor: return static_cast<int64_t>((i * 13 + static_cast<size_t>(r) * 29 + 5) % 128);
    default: throw std::invalid_argument("bad op");
  }
}

int64_t expectedValue(coilDataType_t t, coilRedOp_t op, int n, size_t i) {
  int64_t acc = inputValue(op, 0, n, i);
  for (int r = 1; r < n; ++r) {
    int64_t x = inputValue(op, r, n, i);
    switch (op) {
      case coilSum: case coilAvg: acc += x; break;
      case coilProd: acc *= x; break;
      case coilMax: acc = x > acc ? x : acc; break;
      case coilMin: acc = x < acc ? x : acc; break;
      case coilBand: acc &= x; break;
      case coilBor: acc |= x; break;
      case coilBxor: acc ^= x; break;
      default: break;
    }
  }
  if (op == coilAvg) {
    // Exact: the sum is n*v(i). For unsigned types the wrapped sum n*v is
    // still exact (it is small), so the truncating division gives v too.
    return acc / n;
  }
  if (op == coilProd && isUnsigned(t)) {
    // -1 stored in an unsigned type is its maximum value; products wrap.
    uint64_t bits = 1;
    for (int r = 0; r < n; ++r) bits *= static_cast<uint64_t>(inputValue(op, r, n, i));
    return wrap(t, static_cast<int64_t>(bits));
  }
  if (isUnsigned(t) && (op == coilMax || op == coilMin)) return acc;  // inputs are >= 0
  return wrap(t, acc);
}

std::vector<uint8_t> makeInput(coilDataType_t t, coilRedOp_t op, int rank, int n, size_t count) {
  std::vector<uint8_t> buf(count * sizeOf(t) + 1);
  for (size_t i = 0; i < count; ++i) storeInt(t, buf.data(), i, inputValue(op, rank, n, i));
  return buf;
}

std::vector<uint8_t> makeExpected(coilDataType_t t, coilRedOp_t op, int n, size_t count) {
  std::vector<uint8_t> buf(count * sizeOf(t) + 1);
  for (size_t i = 0; i < count; ++i) storeInt(t, buf.data(), i, expectedValue(t, op, n, i));
  return buf;
}

size_t firstMismatch(coilDataType_t t, const void* got, const void* want, size_t count) {
  size_t s = sizeOf(t);
  auto g = static_cast<const uint8_t*>(got);
  auto w = static_cast<const uint8_t*>(want);
  if (std::memcmp(g, w, count * s) == 0) return SIZE_MAX;
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(g + i * s, w + i * s, s) != 0) return i;
  return SIZE_MAX;
}

}  // namespace coil::test
