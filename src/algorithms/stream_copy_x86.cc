// streamCopy for x86-64: 16-byte streaming stores (SSE2, always present).
#include <emmintrin.h>

#include <cstdint>
#include <cstring>

#include "algorithms/stream_copy.h"

namespace coil::algo {

void streamCopy(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  // Streaming stores need a 16-byte aligned destination: copy the head plainly.
  size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  if (head > bytes) head = bytes;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const size_t body = bytes & ~size_t{63};
  for (size_t i = 0; i < body; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + body, s + body, bytes - body);
}

void streamFence() { _mm_sfence(); }

}  // namespace coil::algo
