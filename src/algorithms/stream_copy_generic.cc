// streamCopy where coil knows no cache-bypassing store: a plain copy.
#include <atomic>
#include <cstring>

#include "algorithms/stream_copy.h"

namespace coil::algo {

void streamCopy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void streamFence() { std::atomic_thread_fence(std::memory_order_release); }

}  // namespace coil::algo
