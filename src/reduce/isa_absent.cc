// Builds without the x86 SIMD kernels (another architecture, or a compiler
// without the -m flags): only the generic table exists. Chosen by
// src/reduce/meson.build instead of kernels_avx2.cc, kernels_avx512.cc and
// cpu_x86.cc.
#include "reduce/kernel_table.h"

namespace coil::reduce {

const KernelTable* avx2Kernels() { return nullptr; }
const KernelTable* avx512Kernels() { return nullptr; }
bool cpuSupports(Isa isa) { return isa == Isa::kGeneric; }

}  // namespace coil::reduce
