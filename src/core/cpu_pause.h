// cpuPause(): the hint a spin-wait gives the CPU between two polls (x86's
// PAUSE: it saves power and leaves the pipeline to a sibling hyper-thread);
// nothing where the architecture has no such hint. Here so that the
// algorithms that spin need no architecture test of their own.
#pragma once

namespace coil {

inline void cpuPause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace coil
