// Copies that bypass the caches, for results too large to stay in them.
//
// A large all-reduce writes its output once and does not read it again
// soon: normal stores would first read every destination line into the cache
// (read-for-ownership) and later evict it, tripling the memory traffic of
// the write. Non-temporal stores write the line straight to memory.
//
// One implementation per architecture, chosen by meson: stream_copy_x86.cc
// (SSE2 streaming stores, part of x86-64's baseline) or stream_copy_generic.cc
// (plain memcpy).
#pragma once

#include <cstddef>

namespace coil::algo {

/// dst[0, bytes) = src[0, bytes), written around the caches where the
/// architecture allows. No alignment is required; the ranges must not overlap.
/// The stores are weakly ordered: call streamFence() before another thread
/// may read dst or before a release store that publishes it.
void streamCopy(void* dst, const void* src, size_t bytes);

/// Orders every earlier streamCopy store before later stores (sfence on x86).
void streamFence();

}  // namespace coil::algo
