#include <algorithm>
#include <map>
#include <mutex>

#include "core/fork_guard.h"
#include "core/error.h"
#include "transports/transport.h"

namespace coil::transport {
namespace {

struct Entry {
  std::string name;
  int preference;
  TransportFactory factory;
};

std::vector<Entry>& entries() {
  static std::vector<Entry> e;
  return e;
}
std::mutex& registryMutex() {
  static std::mutex* m = [] {
    auto* mutex = new std::mutex;
    guardAcrossFork(*mutex);  // a forked child may create communicators
    return mutex;
  }();
  return *m;
}

}  // namespace

void registerTransport(const std::string& name, int preference, TransportFactory factory) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto& e = entries();
  e.push_back({name, preference, std::move(factory)});
  std::stable_sort(e.begin(), e.end(),
                   [](const Entry& a, const Entry& b) { return a.preference < b.preference; });
}

std::vector<std::string> registeredTransports() {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::vector<std::string> names;
  for (const auto& e : entries()) names.push_back(e.name);
  return names;
}

std::unique_ptr<Transport> createTransport(const std::string& name) {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (const auto& e : entries())
    if (e.name == name) return e.factory();
  fail(coilInvalidUsage, "unknown transport '", name, "'");
}

}  // namespace coil::transport
