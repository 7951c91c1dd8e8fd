// coilResetDebugInit: NCCL's ncclResetDebugInit, for programs that change
// COIL_DEBUG* after coil has logged (or tests that need several settings in
// one process).
#include "coil.h"
#include "core/log.h"

extern "C" void coilResetDebugInit(void) {
  try {
    coil::log::reload();
  } catch (...) {
    // Out of memory while reading the settings: keep the old ones.
  }
}
