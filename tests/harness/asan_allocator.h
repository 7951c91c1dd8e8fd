// Whether this build's malloc is AddressSanitizer's. gcc 12's sanitizer
// allocator keeps its own locks and releases none of them across fork, so a
// child forked while another thread allocates can hang inside malloc before
// any lock of coil's matters (seen: a child stuck in SizeClassAllocator64;
// two ranks on one lock in the allocator's region). Tests that fork beside
// allocating threads skip in such a build; the release build runs them.
#pragma once

namespace coil::test {

constexpr bool kAsanAllocator =
#ifdef __SANITIZE_ADDRESS__
    true;
#else
    false;
#endif

}  // namespace coil::test
