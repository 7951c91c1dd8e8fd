// AVX2 kernels: the SIMD template on 256-bit vectors, fp16 through F16C.
//
// Built as its own static library with -mavx2 -mf16c (src/reduce/meson.build)
// and called only after cpuSupports(Isa::kAvx2) said yes. Per-file flags
// rather than __attribute__((target)): the vector-extension template needs
// the ISA for every function it instantiates, which a target attribute on a
// template and all its helpers would have to repeat, and the file flags keep
// the kernel source identical for both ISAs. Everything but avx2Kernels() has
// internal linkage (see simd_kernels.h); that accessor only returns an
// address, so no AVX instruction runs before the CPU check.
#include <immintrin.h>

#include "reduce/simd_kernels.h"

namespace coil::reduce {
namespace {

struct Avx2 {
  static constexpr size_t kVectorBytes = 32;
  using FloatVec = simd::VecOf<float, kVectorBytes>::type;
  using DoubleVec = simd::VecOf<double, kVectorBytes>::type;

  /// 8 fp16 values (16 bytes, unaligned) widened to fp32 (exact).
  static FloatVec loadHalf(const void* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  }
  /// 8 fp32 values rounded to nearest even fp16 (imm8 rounding, not MXCSR).
  static void storeHalf(void* p, FloatVec v) {
    _mm_storeu_si128(static_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  /// Lanes where a or b is NaN (one vcmpunord for two vectors).
  static __m256i unordered(FloatVec a, FloatVec b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_UNORD_Q)); }
  static __m256i unordered(DoubleVec a, DoubleVec b) { return _mm256_castpd_si256(_mm256_cmp_pd(a, b, _CMP_UNORD_Q)); }
  static bool any(__m256i m) { return !_mm256_testz_si256(m, m); }
};

constexpr KernelTable kAvx2Table = makeTable<simd::SimdKernels<Avx2>>();

}  // namespace

const KernelTable* avx2Kernels() { return &kAvx2Table; }

}  // namespace coil::reduce
