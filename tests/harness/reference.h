// Independent reference values for collective tests.
//
// Inputs are small integers chosen so that every partial result of any
// reduction order is exactly representable in every type (fp16 and bf16
// included): then the expected result is exact, computed here in plain
// integer arithmetic, and compared bit for bit. Integer types wrap exactly as
// two's-complement arithmetic does, which the reference reproduces.
#pragma once

#include <cstdint>
#include <vector>

#include "coil.h"

namespace coil::test {

size_t sizeOf(coilDataType_t type);
const char* nameOf(coilDataType_t type);
const char* nameOf(coilRedOp_t op);
/// coilBand, coilBor, coilBxor.
bool isBitwiseOp(coilRedOp_t op);
/// The six integer types (not the four float ones).
bool isIntegerType(coilDataType_t type);
/// False for a bitwise op on a float type, which coil must refuse.
bool opTakesType(coilRedOp_t op, coilDataType_t type);

/// Stores the integer v (exactly representable) as element i of a typed buffer.
void storeInt(coilDataType_t type, void* buf, size_t i, int64_t v);

/// Input of `rank` at element i for an all-reduce with `op` over n ranks.
int64_t inputValue(coilRedOp_t op, int rank, int nranks, size_t i);
/// Expected all-reduce result at element i (already wrapped/truncated for the type).
int64_t expectedValue(coilDataType_t type, coilRedOp_t op, int nranks, size_t i);

/// Fills a typed buffer with this rank's inputs.
std::vector<uint8_t> makeInput(coilDataType_t type, coilRedOp_t op, int rank, int nranks,
                               size_t count);
/// The expected output buffer (bit pattern) of the all-reduce.
std::vector<uint8_t> makeExpected(coilDataType_t type, coilRedOp_t op, int nranks, size_t count);

/// Index of the first element whose bits differ, or SIZE_MAX.
size_t firstMismatch(coilDataType_t type, const void* got, const void* want, size_t count);

}  // namespace coil::test
