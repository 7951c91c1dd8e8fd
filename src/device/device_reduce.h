// Reduction kernels on the GPU: the device counterpart of reduce/reduce.h,
// with the same semantics bit for bit (see reduce.h):
//   * integer sum/prod wrap (two's complement), max/min compare, band/bor/
//     bxor are bitwise (integer types only: a float type is refused);
//   * float max(a,b) = a > b ? a : b, min likewise (equal inputs, e.g.
//     +0/-0, give b);
//   * a float result that is NaN is the canonical quiet NaN: fp32
//     0x7FC00000, fp64 0x7FF8000000000000, fp16 0x7E00, bf16 0x7FC0;
//   * fp16/bf16 are computed in fp32 and rounded once, to nearest even;
//   * coilAvg reduces as coilSum; the division that finishes it is
//     divideAsync.
//
// Plain C++ (no CUDA types): a stream is a cudaStream_t passed as void*
// (nullptr = the legacy default stream); every pointer is device memory of
// the current device. Nothing here synchronizes: the work is enqueued on the
// stream. No alignment is required; dst may alias a source exactly.
//
// Errors throw coil::Error: coilInvalidArgument for an invalid type, op or
// divisor (checked before anything is enqueued, even for count 0);
// coilUnhandledCudaError for a CUDA failure, with CUDA's error name and text
// ("reduceAsync: cudaErrorInvalidDevicePointer: invalid device pointer").
#pragma once

#include <cstddef>
#include <cstdint>

#include "coil.h"
#include "core/error.h"

namespace coil::device {

/// Enqueues dst[i] = a[i] op b[i] for i < count on `stream`.
void reduceAsync(void* dst, const void* a, const void* b, size_t count, coilDataType_t type,
                 coilRedOp_t op, void* stream);

/// The most sources one chain launch reads; reduceChainAsync runs longer
/// chains as several launches, each continuing from dst.
inline constexpr int kChainSourcesPerLaunch = 8;

/// Enqueues dst[i] = (...((src[0][i] op src[1][i]) op src[2][i]) ...) op
/// src[n-1][i] for i < count: the chain of reduceAsync calls in rank order,
/// bit for bit (every step rounds as reduceAsync does), in one pass over
/// the sources (each read once, dst written once) instead of n - 1 passes.
/// n >= 2. dst may be src[0] exactly. In a chain of at most
/// kChainSourcesPerLaunch sources (one launch, which reads all of an
/// element's sources before it writes the element) it may be any one source
/// exactly: a rank reducing in place its own slice, which is its term q
/// (algorithms/registered_collectives.h). It must not overlap a source
/// otherwise (coilInvalidArgument when it is a source a later launch reads).
void reduceChainAsync(void* dst, const void* const* src, int n, size_t count, coilDataType_t type,
                      coilRedOp_t op, void* stream);

/// What reduceChainAsync checks before it enqueues anything (also the fake
/// device's, tests/device): n >= 2, no null source, and dst not a source
/// that a launch after the first reads.
inline void checkChainArguments(const void* dst, const void* const* src, int n, const char* what) {
  if (n < 2) fail(coilInvalidArgument, what, ": a chain needs at least 2 sources, got ", n);
  if (src == nullptr) fail(coilInvalidArgument, what, ": the source list is NULL");
  for (int q = 0; q < n; ++q) {
    if (src[q] == nullptr) fail(coilInvalidArgument, what, ": source ", q, " is NULL");
    if (q > 0 && src[q] == dst && n > kChainSourcesPerLaunch)
      fail(coilInvalidArgument, what, ": dst is source ", q, " of a chain of ", n,
           " (more than one launch of ", kChainSourcesPerLaunch,
           "); only source 0 may be dst there");
  }
}

/// Enqueues dst[i] = src[i] / divisor for i < count on `stream`, bit-identical
/// to coil::reduce::divider(type): integers in 64 bits of their signedness
/// (truncating), floats in their compute precision (fp16/bf16 in fp32, one
/// rounding back). divisor must be >= 1. dst may alias src exactly.
void divideAsync(void* dst, const void* src, size_t count, coilDataType_t type, int divisor,
                 void* stream);

/// Loads every kernel reduceAsync, reduceChainAsync and divideAsync launch
/// into the current device's context, once per device and process (a
/// second call for a device returns at once). A communicator's init calls
/// it: the CUDA runtime loads a kernel lazily at its first launch, and
/// loading may wait for the device's streams to drain (CUDA's lazy-loading
/// notes), so a first launch behind a stream that waits for a step of this
/// very call could wait forever (NCCL loads its kernels at init as well).
void loadReductionKernels();

/// Hooks for tests and benchmarks only (tests/gpu, benchmarks/micro); not for
/// the library's own use.
namespace testing {

/// How the kernels widen and narrow fp16. kHardware (what reduceAsync and
/// divideAsync use): the GPU's cvt.f32.f16 / cvt.rn.f16.f32 instructions,
/// which are exact / IEEE round-to-nearest-even for every non-NaN value;
/// NaNs never reach them (the kernels test for NaN first and write the
/// canonical 0x7E00). kSoftware: the integer code of half_device.h, a
/// transcription of reduce/half.h. bf16 always uses integer code (it is as
/// cheap as an instruction).
enum class HalfCodec { kHardware = 0, kSoftware = 1 };

/// The codec reduceAsync/divideAsync use for fp16.
HalfCodec defaultHalfCodec();

/// reduceAsync with an explicit fp16 codec (other types are unaffected).
void reduceAsyncWith(HalfCodec codec, void* dst, const void* a, const void* b, size_t count,
                     coilDataType_t type, coilRedOp_t op, void* stream);
/// reduceChainAsync with an explicit fp16 codec.
void reduceChainAsyncWith(HalfCodec codec, void* dst, const void* const* src, int n, size_t count,
                          coilDataType_t type, coilRedOp_t op, void* stream);
/// divideAsync with an explicit fp16 codec.
void divideAsyncWith(HalfCodec codec, void* dst, const void* src, size_t count,
                     coilDataType_t type, int divisor, void* stream);

/// dst[i] = the fp32 bits of widening src[i] (type coilFloat16 or
/// coilBfloat16) on the device with `codec`. The hardware fp16 codec makes
/// any NaN some NaN (its bits are not specified); every other result is
/// exact. dst and src must be 4- and 2-byte aligned.
void widenAsync(HalfCodec codec, uint32_t* dst, const uint16_t* src, size_t count,
                coilDataType_t type, void* stream);
/// dst[i] = src[i] (fp32 bits) narrowed to fp16/bf16 on the device with
/// `codec`, NaN handling included as the kernels do it: the hardware fp16
/// codec gives 0x7E00 for every NaN, the software codecs keep the top
/// payload bits like reduce/half.h. Alignment as widenAsync.
void narrowAsync(HalfCodec codec, uint16_t* dst, const uint32_t* src, size_t count,
                 coilDataType_t type, void* stream);

}  // namespace testing

}  // namespace coil::device
