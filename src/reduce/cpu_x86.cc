// CPU feature checks on x86 (the build has the AVX2 and AVX-512 tables).
// This file is built with the baseline flags, so it runs on any x86-64.
// __builtin_cpu_supports also checks that the OS saves the vector state;
// F16C is read from CPUID directly because not every compiler's
// __builtin_cpu_supports knows the name (clang 14 does not), and its
// registers are the AVX ones the avx2 check already covers.
#include <cpuid.h>

#include "reduce/kernel_table.h"

namespace coil::reduce {
namespace {

bool hasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

}  // namespace

bool cpuSupports(Isa isa) {
  switch (isa) {
    case Isa::kGeneric:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && hasF16c();
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }
  return false;
}

}  // namespace coil::reduce
