// The self-tests' reference arithmetic: it decodes every element to a
// double, reduces in rank order and rounds once, and shares no code with
// the checker's integer arithmetic (check.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "check.h"
#include "dtypes.h"

namespace coil_perf::reference {

inline double decode(const unsigned char* p, const TypeInfo& t) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, t.size);
  switch (t.encoding) {
    case Encoding::SignedInt: {
      const unsigned shift = 64 - 8 * static_cast<unsigned>(t.size);
      return static_cast<double>(static_cast<int64_t>(bits << shift) >> shift);
    }
    case Encoding::UnsignedInt: return static_cast<double>(bits);
    case Encoding::Float: { float f; std::memcpy(&f, p, 4); return f; }
    case Encoding::Double: { double d; std::memcpy(&d, p, 8); return d; }
    case Encoding::Half: {
      const int e = (bits >> 10) & 31, m = bits & 1023;
      const double v = e ? std::ldexp(1024.0 + m, e - 25) : std::ldexp(double(m), -24);
      return (bits & 0x8000) ? -v : v;
    }
    case Encoding::Bfloat16: {
      const uint32_t u = static_cast<uint32_t>(bits) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
  }
  return 0;
}

inline void encode(double v, unsigned char* p, const TypeInfo& t) {
  switch (t.encoding) {
    case Encoding::SignedInt:
    case Encoding::UnsignedInt: { const int64_t i = static_cast<int64_t>(v); std::memcpy(p, &i, t.size); break; }
    case Encoding::Float: { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case Encoding::Double: std::memcpy(p, &v, 8); break;
    case Encoding::Half: { const uint16_t h = floatToHalfBits(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case Encoding::Bfloat16: { const uint16_t h = floatToBf16Bits(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
  }
}

/// The reduction `op` over `n` inputs of element i, as the reference computes it.
template <typename InputAt>
inline void reduceElement(InputAt inputAt, int n, const TypeInfo& t, coilRedOp_t op,
                          unsigned char* out) {
  if (op == coilBand || op == coilBor || op == coilBxor) {  // on the raw bytes
    for (size_t b = 0; b < t.size; ++b) {
      unsigned acc = inputAt(0)[b];
      for (int r = 1; r < n; ++r) {
        const unsigned v = inputAt(r)[b];
        acc = op == coilBand ? (acc & v) : op == coilBor ? (acc | v) : (acc ^ v);
      }
      out[b] = static_cast<unsigned char>(acc);
    }
    return;
  }
  double acc = decode(inputAt(0), t);
  for (int r = 1; r < n; ++r) {
    const double v = decode(inputAt(r), t);
    if (op == coilProd) acc *= v;
    else if (op == coilMax) acc = std::max(acc, v);
    else if (op == coilMin) acc = std::min(acc, v);
    else acc += v;
  }
  if (op == coilAvg) {
    const bool integer = t.encoding == Encoding::SignedInt || t.encoding == Encoding::UnsignedInt;
    acc = integer ? std::trunc(acc / n) : acc / n;
  }
  encode(acc, out, t);
}

}  // namespace coil_perf::reference
