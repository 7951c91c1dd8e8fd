// Reduction kernels: one dtype × op table, chosen once at run time for the
// CPU (AVX-512, AVX2, or portable C++).
//
// fp16 and bf16 are computed in fp32 and rounded back to nearest-even, one
// rounding per call (so a ring of n ranks rounds n-1 times, as NCCL does).
// coilAvg is not a kernel of its own: collectives reduce with coilSum and
// finish with divide() once, on the rank that completes each element, so
// every rank gets the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coil.h"

namespace coil::reduce {

/// dst[i] = a[i] op b[i] for i < count. dst may alias a or b exactly; no
/// alignment is required.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

/// dst[i] = src[i] / divisor (integers truncate toward zero, like C). dst may
/// alias src.
using DivideFn = void (*)(void* dst, const void* src, size_t count, int divisor);

/// Kernel for (type, op). coilAvg returns the coilSum kernel. Both arguments
/// must be valid (see validType/validOp).
ReduceFn kernel(coilDataType_t type, coilRedOp_t op);
/// Division kernel used to finish coilAvg.
DivideFn divider(coilDataType_t type);

bool validType(int type);
bool validOp(int op);
size_t typeSize(coilDataType_t type);
const char* typeName(coilDataType_t type);  // "float32", "bfloat16", ...
const char* opName(coilRedOp_t op);         // "sum", "prod", "max", "min", "avg"

/// Which implementation the dispatcher picked: "avx512", "avx2" or "generic".
/// COIL_REDUCE_ISA=generic|avx2|avx512 forces one (tests use it to cover all).
const char* activeIsa();

/// Scalar conversions (round-to-nearest-even), exposed for tests and tools.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

}  // namespace coil::reduce
