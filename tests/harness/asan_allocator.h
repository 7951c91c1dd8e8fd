// Whether this build's malloc is AddressSanitizer's. gcc 12's sanitizer
// allocator keeps its own locks and releases none of them across fork, so a
// child forked while another thread allocates can hang inside malloc before
// any lock of coil's matters (seen: a child stuck in SizeClassAllocator64;
// two ranks on one lock in the allocator's region). clang 14's is the same
// allocator. Tests that fork beside allocating threads skip in such a
// build; the release build runs them.
#pragma once

// gcc defines __SANITIZE_ADDRESS__ under -fsanitize=address; clang before
// 16 says so only through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define COIL_TEST_ASAN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COIL_TEST_ASAN_ALLOCATOR 1
#endif
#endif

namespace coil::test {

constexpr bool kAsanAllocator =
#ifdef COIL_TEST_ASAN_ALLOCATOR
    true;
#else
    false;
#endif

}  // namespace coil::test
