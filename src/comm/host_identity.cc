#include "comm/host_identity.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "core/env.h"

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
  // COIL_HOSTID names the host instead of its name and network namespace
  // (NCCL_HOSTID's meaning): ranks given different ids are on different
  // hosts, shm never joins them. The boot id stays in, so one id set on
  // two machines still names two hosts.
  const std::string boot = readFirstLine("/proc/sys/kernel/random/boot_id");
  if (auto id = env::get("COIL_HOSTID"); id && !id->empty())
    return fnv1a("hostid:" + *id + "|" + boot);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  char ns[128] = {};
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  if (n < 0) n = 0;
  ns[n] = '\0';
  return fnv1a(std::string(host) + "|" + boot + "|" + ns);
}

}  // namespace coil
