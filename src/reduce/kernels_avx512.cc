// AVX-512 kernels: the SIMD template on 512-bit vectors.
//
// Built as its own static library with -mavx512f -mavx512bw -mavx512dq
// -mavx512vl (BW for 8-bit lanes, DQ for 64-bit multiplies; see
// src/reduce/meson.build) and called only after cpuSupports(Isa::kAvx512)
// checked all four. Why per-file flags and why that is safe: see
// kernels_avx2.cc and simd_kernels.h.
#include <immintrin.h>

#include "reduce/simd_kernels.h"

namespace coil::reduce {
namespace {

struct Avx512 {
  static constexpr size_t kVectorBytes = 64;
  using FloatVec = simd::VecOf<float, kVectorBytes>::type;
  using DoubleVec = simd::VecOf<double, kVectorBytes>::type;

  // The zero-masking forms with an all-ones mask are the plain
  // instructions; the unmasked intrinsics of GCC 12 trip
  // -Wmaybe-uninitialized inside their own header (GCC bug 105593).
  static constexpr __mmask16 kAll = 0xFFFF;

  /// 16 fp16 values (32 bytes, unaligned) widened to fp32 (exact).
  static FloatVec loadHalf(const void* p) {
    return _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(static_cast<const __m256i*>(p)));
  }
  /// 16 fp32 values rounded to nearest even fp16 (imm8 rounding, not MXCSR).
  static void storeHalf(void* p, FloatVec v) {
    _mm256_storeu_si256(static_cast<__m256i*>(p),
                        _mm512_maskz_cvtps_ph(kAll, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  /// Lanes where a or b is NaN (one vcmpunord for two vectors).
  static unsigned unordered(FloatVec a, FloatVec b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
  static unsigned unordered(DoubleVec a, DoubleVec b) { return _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q); }
  static bool any(unsigned m) { return m != 0; }
};

constexpr KernelTable kAvx512Table = makeTable<simd::SimdKernels<Avx512>>();

}  // namespace

const KernelTable* avx512Kernels() { return &kAvx512Table; }

}  // namespace coil::reduce
