// The honest float32 baseline for the reduction kernels: c[i] = a[i] + b[i]
// as a plain loop, vectorized by the compiler at -O3 for whatever -m flags
// this copy is built with. meson builds it once per ISA and gives each copy
// its own name through COIL_BASELINE_ADD (see meson.build), so the kernels
// are compared with what the compiler does on its own at the same width.
#include <cstddef>

void COIL_BASELINE_ADD(float* c, const float* a, const float* b, size_t count) {
  for (size_t i = 0; i < count; ++i) c[i] = a[i] + b[i];
}
