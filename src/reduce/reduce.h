// Reduction kernels: one dtype × op table, chosen once at run time for the
// CPU (AVX-512, AVX2, or portable C++).
//
// fp16 and bf16 are computed in fp32 and rounded back to nearest-even, one
// rounding per call (so a ring of n ranks rounds n-1 times, as NCCL does).
// coilAvg is not a kernel of its own: collectives reduce with coilSum and
// finish with divide() once, on the rank that completes each element, so
// every rank gets the same bits.
//
// Semantics shared by every implementation (bit for bit, tested):
//   * integer sum/prod wrap (two's complement), max/min compare, band/bor/
//     bxor are bitwise; the bitwise ops take integer types only;
//   * float max(a,b) = a > b ? a : b, min likewise (equal inputs, e.g.
//     +0/-0, give b);
//   * a float result that is NaN (NaN input to any op, Inf-Inf, 0*Inf) is
//     the canonical quiet NaN: fp32 0x7FC00000, fp64 0x7FF8000000000000,
//     fp16 0x7E00, bf16 0x7FC0. Payloads are not kept: x86 keeps one
//     operand's payload depending on operand order, which compilers swap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coil.h"

namespace coil::reduce {

/// dst[i] = a[i] op b[i] for i < count. dst may alias a or b exactly; no
/// alignment is required.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

/// dst[i] = src[i] / divisor (integers truncate toward zero, like C; floats
/// divide in their own precision, fp16/bf16 in fp32 with one rounding back).
/// dst may alias src. divisor must be >= 1 (the rank count); otherwise the
/// kernel throws coil::Error(coilInvalidArgument).
using DivideFn = void (*)(void* dst, const void* src, size_t count, int divisor);

/// Kernel for (type, op). coilAvg returns the coilSum kernel. Both arguments
/// must be valid and go together (see validType/validOp/takesType);
/// otherwise throws coil::Error(coilInvalidArgument).
ReduceFn kernel(coilDataType_t type, coilRedOp_t op);
/// Division kernel used to finish coilAvg; throws like kernel() for an
/// invalid type.
DivideFn divider(coilDataType_t type);

/// dst = x[0] op x[1] op ... op x[n-1], element-wise, in that order, then
/// divided by n once for coilAvg: the one-shot's reduction, which gives
/// every rank that runs it the same bits. dst may alias x[0] or x[1] only
/// (a later block would be read after the first kernel call wrote dst).
/// n >= 1; n == 1 copies x[0] (unless dst is x[0]).
void reduceInRankOrder(coilDataType_t type, coilRedOp_t op, void* dst, const void* const* x,
                       int n, size_t count);

/// True for 0 <= type < coilNumTypes.
bool validType(int type);
/// True for 0 <= op < coilNumOps (coilAvg and the bitwise ops included).
bool validOp(int op);
/// True for coilBand, coilBor and coilBxor.
bool isBitwise(int op);
/// True when the valid `op` is defined on the valid `type`: every op is,
/// except the bitwise ones on a float type.
bool takesType(coilRedOp_t op, coilDataType_t type);
/// Throws coil::Error(coilInvalidArgument) naming both when !takesType(op,
/// type): "<what>: reduction op bxor takes integer datatypes only, not
/// float32" (no "<what>: " when what is null).
void checkTakesType(coilRedOp_t op, coilDataType_t type, const char* what);
/// Bytes per element; throws coil::Error(coilInvalidArgument) for an invalid type.
size_t typeSize(coilDataType_t type);
/// "float32", "bfloat16", ...; "invalid-type" for an invalid value (safe in messages).
const char* typeName(coilDataType_t type);
/// "sum", "prod", "max", "min", "avg", "band", "bor", "bxor"; "invalid-op"
/// for an invalid value.
const char* opName(coilRedOp_t op);

/// Which implementation the dispatcher picked: "avx512", "avx2" or "generic",
/// chosen once per process: the best one the CPU runs.
/// COIL_REDUCE_ISA=generic|avx2|avx512 forces one. A name this CPU (or build)
/// cannot run logs a warning and the best available one is used; any other
/// value throws coil::Error(coilInvalidUsage) from the first lookup.
const char* activeIsa();

/// Scalar conversions (round-to-nearest-even), exposed for tests and tools.
/// Widening is exact (an fp16 NaN comes back quiet); narrowing overflows to
/// ±Inf, produces subnormals, and keeps a NaN a NaN (quiet, top payload bits).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

}  // namespace coil::reduce
