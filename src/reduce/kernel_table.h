// Internal to src/reduce (and its tests): the dtype × op table every ISA
// fills from one kernel template, and the per-ISA lookup that lets a test
// or benchmark drive every implementation in one process.
//
// How an ISA plugs in: a struct `Impl` with two static member templates,
//   template <class T, Op kOp> static void reduce(void*, const void*, const void*, size_t);
//   template <class T> static void divide(void*, const void*, size_t, int);
// where T is the storage type (StorageOf below). makeTable<Impl>() builds the
// constexpr table from them; nothing else is written per (type, op).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "reduce/reduce.h"

namespace coil::reduce {

/// The implementations a table can come from, slowest first.
enum class Isa { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };
constexpr int kNumIsas = 3;

/// Kernel operators. coilAvg is not one: it reduces with kSum and finishes
/// with a divide kernel. The bitwise ones exist for the integer types only.
enum class Op { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kBand = 4, kBor = 5, kBxor = 6 };
constexpr int kNumKernelOps = 7;

/// The kernel op of a valid coilRedOp_t (coilAvg: kSum).
constexpr Op kernelOpOf(coilRedOp_t op) {
  switch (op) {
    case coilProd: return Op::kProd;
    case coilMax: return Op::kMax;
    case coilMin: return Op::kMin;
    case coilBand: return Op::kBand;
    case coilBor: return Op::kBor;
    case coilBxor: return Op::kBxor;
    default: return Op::kSum;  // coilSum, coilAvg
  }
}

/// Storage-only element types for the two 16-bit floats (no arithmetic on
/// them: kernels widen to float, compute, and round back).
struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
static_assert(sizeof(Float16) == 2 && sizeof(BFloat16) == 2);

/// The C++ storage type of each coilDataType_t.
template <coilDataType_t kType> struct StorageOf;
template <> struct StorageOf<coilInt8> { using type = int8_t; };
template <> struct StorageOf<coilUint8> { using type = uint8_t; };
template <> struct StorageOf<coilInt32> { using type = int32_t; };
template <> struct StorageOf<coilUint32> { using type = uint32_t; };
template <> struct StorageOf<coilInt64> { using type = int64_t; };
template <> struct StorageOf<coilUint64> { using type = uint64_t; };
template <> struct StorageOf<coilFloat16> { using type = Float16; };
template <> struct StorageOf<coilFloat32> { using type = float; };
template <> struct StorageOf<coilFloat64> { using type = double; };
template <> struct StorageOf<coilBfloat16> { using type = BFloat16; };

/// One ISA's kernels: reduce[type][op] and divide[type]. Every entry is set
/// except the bitwise ops of the float types, which are null.
struct KernelTable {
  ReduceFn reduce[coilNumTypes][kNumKernelOps];
  DivideFn divide[coilNumTypes];
};

namespace detail {
template <class Impl, coilDataType_t kType>
constexpr void fillRow(KernelTable& table) {
  using T = typename StorageOf<kType>::type;
  table.reduce[kType][static_cast<int>(Op::kSum)] = &Impl::template reduce<T, Op::kSum>;
  table.reduce[kType][static_cast<int>(Op::kProd)] = &Impl::template reduce<T, Op::kProd>;
  table.reduce[kType][static_cast<int>(Op::kMax)] = &Impl::template reduce<T, Op::kMax>;
  table.reduce[kType][static_cast<int>(Op::kMin)] = &Impl::template reduce<T, Op::kMin>;
  if constexpr (std::is_integral_v<T>) {
    table.reduce[kType][static_cast<int>(Op::kBand)] = &Impl::template reduce<T, Op::kBand>;
    table.reduce[kType][static_cast<int>(Op::kBor)] = &Impl::template reduce<T, Op::kBor>;
    table.reduce[kType][static_cast<int>(Op::kBxor)] = &Impl::template reduce<T, Op::kBxor>;
  }
  table.divide[kType] = &Impl::template divide<T>;
}
template <class Impl, size_t... kTypes>
constexpr KernelTable makeTableOf(std::index_sequence<kTypes...>) {
  KernelTable table{};
  (fillRow<Impl, static_cast<coilDataType_t>(kTypes)>(table), ...);
  return table;
}
}  // namespace detail

/// The full table of one implementation, built at compile time.
template <class Impl>
constexpr KernelTable makeTable() {
  return detail::makeTableOf<Impl>(std::make_index_sequence<coilNumTypes>{});
}

// ---- per-ISA tables (each defined in its own translation unit) -------------

/// The portable C++ kernels (kernels_generic.cc); always present.
const KernelTable& genericKernels();
/// The AVX2+F16C kernels, or nullptr when this build has none (non-x86).
/// Having a table does not mean the CPU can run it: see cpuSupports.
const KernelTable* avx2Kernels();
/// The AVX-512 (F, BW, DQ, VL) kernels, or nullptr when this build has none.
const KernelTable* avx512Kernels();

/// True when the CPU (and OS) can execute `isa`'s instructions. kGeneric: always.
bool cpuSupports(Isa isa);

// ---- lookup (reduce.cc) ------------------------------------------------------

/// "generic", "avx2" or "avx512".
const char* isaName(Isa isa);
/// True when `isa` is both compiled in and supported by this CPU.
bool isaAvailable(Isa isa);
/// Every available ISA, generic first, best last.
std::vector<Isa> availableIsas();
/// The ISA the dispatcher uses (see activeIsa() in reduce.h for the rules).
Isa activeIsaId();

/// The reduce kernel of `isa` for (type, op); coilAvg gives the coilSum kernel.
/// Throws coilInvalidArgument for an invalid type/op (a bitwise op on a
/// float type included) and coilInvalidUsage
/// when `isa` is not available here.
ReduceFn kernelFor(Isa isa, coilDataType_t type, coilRedOp_t op);
/// The divide kernel of `isa` for `type`; throws like kernelFor.
DivideFn dividerFor(Isa isa, coilDataType_t type);

/// Throws coilInvalidArgument for a divisor < 1. Divide kernels call it; it
/// is out of line so that ISA translation units instantiate no shared
/// templates (see the note in simd_kernels.h).
[[noreturn]] void failBadDivisor(int divisor);

}  // namespace coil::reduce
