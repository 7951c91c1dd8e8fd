#include "topo/binding.h"

#include <pthread.h>
#include <sched.h>
#include <strings.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "topo/cpu_list.h"
#include "topo/process_topology.h"

namespace coil::topo {

BindMode bindMode() {
  const auto value = env::get("COIL_BIND");
  if (!value || strcasecmp(value->c_str(), "none") == 0) return BindMode::kNone;
  if (strcasecmp(value->c_str(), "auto") == 0) return BindMode::kAuto;
  fail(coilInvalidUsage, "COIL_BIND=", *value, ": expected none or auto");
}

std::vector<unsigned> bindingFor(const Topology& topology, const std::vector<unsigned>& rankCpus,
                                 std::string* why) {
  const std::optional<unsigned> node = homeNode(topology, rankCpus);
  if (!node) {
    *why = "the topology knows no NUMA node of CPUs " + formatCpuList(rankCpus);
    return {};
  }
  std::vector<unsigned> cpus;
  for (const NumaNode& n : topology.numaNodes)
    if (n.osIndex == *node)
      std::set_intersection(n.cpus.begin(), n.cpus.end(), rankCpus.begin(), rankCpus.end(),
                            std::back_inserter(cpus));
  *why = "NUMA node " + std::to_string(*node) + " of the rank's CPUs " + formatCpuList(rankCpus);
  return cpus;
}

namespace {
// Binds `thread` to `cpus`; 0 or an errno value.
int bind(std::thread& thread, const std::vector<unsigned>& cpus) {
  const size_t n = size_t{cpus.back()} + 1;
  cpu_set_t* set = CPU_ALLOC(n);
  if (set == nullptr) return ENOMEM;
  const size_t bytes = CPU_ALLOC_SIZE(n);
  CPU_ZERO_S(bytes, set);
  for (unsigned c : cpus) CPU_SET_S(c, bytes, set);
  const int err = pthread_setaffinity_np(thread.native_handle(), bytes, set);
  CPU_FREE(set);
  return err;
}
}  // namespace

void bindOwnThread(std::thread& thread, const char* what) noexcept {
  try {
    if (bindMode() != BindMode::kAuto) return;
    const std::vector<unsigned> rankCpus = threadCpus();  // the mask `thread` inherited
    if (rankCpus.empty()) {
      COIL_WARN(kInit, "COIL_BIND=auto: ", what,
                " thread left unbound (sched_getaffinity failed: ", std::strerror(errno), ")");
      return;
    }
    std::string why;
    const std::vector<unsigned> cpus = bindingFor(processTopology(), rankCpus, &why);
    if (cpus.empty()) {
      COIL_INFO(kInit, "COIL_BIND=auto: ", what, " thread left unbound (", why, ")");
      return;
    }
    if (const int err = bind(thread, cpus); err != 0) {
      COIL_WARN(kInit, "COIL_BIND=auto: ", what, " thread left unbound (pthread_setaffinity_np: ",
                std::strerror(err), ")");
      return;
    }
    COIL_INFO(kInit, "COIL_BIND=auto: ", what, " thread bound to CPUs ", formatCpuList(cpus),
              " (", why, ")");
  } catch (const std::exception& e) {
    // Init already refused a bad COIL_BIND; this is a value set after it.
    COIL_WARN(kInit, what, " thread left unbound: ", e.what());
  }
}

}  // namespace coil::topo
