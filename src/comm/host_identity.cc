#include "comm/host_identity.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace coil {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string readFirstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

}  // namespace

uint64_t localHostHash() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  char ns[128] = {};
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  if (n < 0) n = 0;
  ns[n] = '\0';
  return fnv1a(std::string(host) + "|" + readFirstLine("/proc/sys/kernel/random/boot_id") + "|" +
               ns);
}

}  // namespace coil
