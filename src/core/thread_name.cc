#include "core/thread_name.h"

#include <pthread.h>

namespace coil {
namespace {
// Linux keeps 16 bytes of a thread's name, the terminating NUL included.
constexpr size_t kThreadNameChars = 15;
}  // namespace

std::string ownThreadName(const char* role, int rank) {
  std::string name = std::string("coil-") + role;
  if (rank >= 0) name += "-r" + std::to_string(rank);
  if (name.size() > kThreadNameChars) name.resize(kThreadNameChars);
  return name;
}

void nameOwnThread(std::thread& thread, const char* role, int rank) noexcept {
  try {
    pthread_setname_np(thread.native_handle(), ownThreadName(role, rank).c_str());
  } catch (...) {
    // std::bad_alloc building a 15-character string: keep the thread unnamed.
  }
}

}  // namespace coil
