// Names, argument checks and the run-time choice of kernel table.
//
// The choice is made once, at the first lookup: the best ISA the CPU runs,
// unless COIL_REDUCE_ISA names another. An unknown name is an error
// (coilInvalidUsage: a typo must not silently change what runs); a known
// name the CPU or the build cannot run is a warning, and the best available
// ISA is used, so one setting can be shared by a mixed cluster and no
// instruction the CPU lacks is ever executed.
#include <array>
#include <cstring>
#include <string>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "reduce/half.h"
#include "reduce/kernel_table.h"

namespace coil::reduce {
namespace {

const KernelTable* tableOf(Isa isa) {
  switch (isa) {
    case Isa::kGeneric:
      return &genericKernels();
    case Isa::kAvx2:
      return avx2Kernels();
    case Isa::kAvx512:
      return avx512Kernels();
  }
  return nullptr;
}

Isa bestIsa() {
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2})
    if (isaAvailable(isa)) return isa;
  return Isa::kGeneric;
}

Isa chooseIsa() {
  const Isa best = bestIsa();
  const auto forced = env::get("COIL_REDUCE_ISA");
  if (!forced) return best;
  for (int i = 0; i < kNumIsas; ++i) {
    const Isa isa = static_cast<Isa>(i);
    if (*forced != isaName(isa)) continue;
    if (isaAvailable(isa)) return isa;
    COIL_WARN(kInit, "COIL_REDUCE_ISA=", *forced, " cannot run here (",
              tableOf(isa) == nullptr ? "not built" : "CPU lacks it", "); using ",
              isaName(best));
    return best;
  }
  fail(coilInvalidUsage, "COIL_REDUCE_ISA='", *forced, "' is not one of generic, avx2, avx512");
}

void checkType(coilDataType_t type, const char* what) {
  if (!validType(type))
    fail(coilInvalidArgument, what, ": invalid datatype ", static_cast<int>(type), " (valid: 0..",
         coilNumTypes - 1, ")");
}

void checkOp(coilRedOp_t op, const char* what) {
  if (!validOp(op))
    fail(coilInvalidArgument, what, ": invalid reduction op ", static_cast<int>(op), " (valid: 0..",
         coilNumOps - 1, ")");
}

const KernelTable& availableTable(Isa isa, const char* what) {
  if (!isaAvailable(isa))
    fail(coilInvalidUsage, what, ": the ", isaName(isa), " kernels ",
         tableOf(isa) == nullptr ? "are not built into this library" : "need CPU features this CPU lacks");
  return *tableOf(isa);
}

template <size_t... kTypes>
constexpr std::array<size_t, coilNumTypes> sizesOf(std::index_sequence<kTypes...>) {
  return {sizeof(typename StorageOf<static_cast<coilDataType_t>(kTypes)>::type)...};
}

// Resolved once; the pointer stays valid for the life of the process.
const KernelTable& activeTable() {
  static const KernelTable& table = *tableOf(activeIsaId());
  return table;
}

}  // namespace

// ---- internal lookup (kernel_table.h) -------------------------------------

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::kGeneric:
      return "generic";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool isaAvailable(Isa isa) { return tableOf(isa) != nullptr && cpuSupports(isa); }

std::vector<Isa> availableIsas() {
  std::vector<Isa> out;
  for (int i = 0; i < kNumIsas; ++i)
    if (isaAvailable(static_cast<Isa>(i))) out.push_back(static_cast<Isa>(i));
  return out;
}

Isa activeIsaId() {
  static const Isa isa = chooseIsa();
  return isa;
}

ReduceFn kernelFor(Isa isa, coilDataType_t type, coilRedOp_t op) {
  checkType(type, "reduce kernel");
  checkOp(op, "reduce kernel");
  checkTakesType(op, type, "reduce kernel");
  return availableTable(isa, "reduce kernel").reduce[type][static_cast<int>(kernelOpOf(op))];
}

DivideFn dividerFor(Isa isa, coilDataType_t type) {
  checkType(type, "divide kernel");
  return availableTable(isa, "divide kernel").divide[type];
}

void failBadDivisor(int divisor) {
  fail(coilInvalidArgument, "divide kernel: divisor must be >= 1, got ", divisor);
}

// ---- public interface (reduce.h) -------------------------------------------

ReduceFn kernel(coilDataType_t type, coilRedOp_t op) {
  checkType(type, "reduce kernel");
  checkOp(op, "reduce kernel");
  checkTakesType(op, type, "reduce kernel");
  return activeTable().reduce[type][static_cast<int>(kernelOpOf(op))];
}

DivideFn divider(coilDataType_t type) {
  checkType(type, "divide kernel");
  return activeTable().divide[type];
}

void reduceInRankOrder(coilDataType_t type, coilRedOp_t op, void* dst, const void* const* x,
                       int n, size_t count) {
  if (n == 1) {  // nothing to reduce, and dividing by one changes nothing
    if (dst != x[0]) std::memcpy(dst, x[0], count * typeSize(type));
    return;
  }
  const ReduceFn fn = kernel(type, op);
  fn(dst, x[0], x[1], count);
  for (int q = 2; q < n; ++q) fn(dst, dst, x[q], count);
  if (op == coilAvg) divider(type)(dst, dst, count, n);
}

bool validType(int type) { return type >= 0 && type < coilNumTypes; }
bool validOp(int op) { return op >= 0 && op < coilNumOps; }
bool isBitwise(int op) { return op == coilBand || op == coilBor || op == coilBxor; }

bool takesType(coilRedOp_t op, coilDataType_t type) {
  const bool isFloat = type == coilFloat16 || type == coilFloat32 || type == coilFloat64 ||
                       type == coilBfloat16;
  return !(isBitwise(op) && isFloat);
}

void checkTakesType(coilRedOp_t op, coilDataType_t type, const char* what) {
  if (!takesType(op, type))
    fail(coilInvalidArgument, what ? what : "", what ? ": " : "", "reduction op ", opName(op),
         " takes integer datatypes only, not ", typeName(type));
}

size_t typeSize(coilDataType_t type) {
  static constexpr auto kSizes = sizesOf(std::make_index_sequence<coilNumTypes>{});
  checkType(type, "typeSize");
  return kSizes[type];
}

const char* typeName(coilDataType_t type) {
  static constexpr const char* kNames[coilNumTypes] = {
      "int8", "uint8", "int32", "uint32", "int64", "uint64",
      "float16", "float32", "float64", "bfloat16"};
  return validType(type) ? kNames[type] : "invalid-type";
}

const char* opName(coilRedOp_t op) {
  static constexpr const char* kNames[coilNumOps] = {"sum", "prod", "max", "min",
                                                      "avg", "band", "bor", "bxor"};
  return validOp(op) ? kNames[op] : "invalid-op";
}

const char* activeIsa() { return isaName(activeIsaId()); }

float halfToFloat(uint16_t h) { return scalar::halfToFloat(h); }
uint16_t floatToHalf(float f) { return scalar::floatToHalf(f); }
float bf16ToFloat(uint16_t b) { return scalar::bf16ToFloat(b); }
uint16_t floatToBf16(float f) { return scalar::floatToBf16(f); }

}  // namespace coil::reduce
