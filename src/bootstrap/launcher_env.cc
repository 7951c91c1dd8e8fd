#include "bootstrap/launcher_env.h"

#include <climits>

#include "core/env.h"
#include "core/error.h"

namespace coil {
namespace {


// The variables one launcher sets.
struct LauncherVars {
  const char* name;           // as shown in messages
  const char* style;          // "torchrun-style launch"
  const char* rankVar;
  const char* sizeVar;
  const char* localRankVar;
  const char* jobKeyVar;
};

constexpr LauncherVars kTorchrun{"torchrun", "torchrun-style launch", "RANK", "WORLD_SIZE",
                                 "LOCAL_RANK", "TORCHELASTIC_RUN_ID"};
constexpr LauncherVars kOpenMpi{"Open MPI", "Open MPI launch", "OMPI_COMM_WORLD_RANK",
                                "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                "OMPI_MCA_ess_base_jobid"};
constexpr LauncherVars kSlurm{"Slurm", "Slurm launch", "SLURM_PROCID", "SLURM_NTASKS",
                              "SLURM_LOCALID", "SLURM_JOB_ID"};

bool detected(const LauncherVars& l) {
  return env::get(l.rankVar).has_value() || env::get(l.sizeVar).has_value();
}

// "(RANK and WORLD_SIZE are set)"-style reminder of why we chose this launcher.
std::string why(const LauncherVars& l) {
  bool rank = env::get(l.rankVar).has_value(), size = env::get(l.sizeVar).has_value();
  if (rank && size) return std::string(" (") + l.rankVar + " and " + l.sizeVar + " are set)";
  return std::string(" (") + (rank ? l.rankVar : l.sizeVar) + " is set)";
}

int64_t requiredInt(const LauncherVars& l, const char* var, int64_t lo, int64_t hi) {
  std::optional<int64_t> v;
  try {
    v = env::getInt(var, lo, hi);
  } catch (const Error& e) {
    fail(coilInvalidUsage, l.style, ": ", e.what());
  }
  if (!v) fail(coilInvalidUsage, l.style, " needs ", var, why(l));
  return *v;
}

std::string required(const LauncherVars& l, const char* var) {
  auto v = env::get(var);
  if (!v) fail(coilInvalidUsage, l.style, " needs ", var, why(l));
  return *v;
}

SocketAddress masterAddress(const LauncherVars& l, int64_t port) {
  std::string host = required(l, "MASTER_ADDR");
  bool ipv6Literal = host.find(':') != std::string::npos && host.front() != '[';
  std::string text = (ipv6Literal ? "[" + host + "]" : host) + ":" + std::to_string(port);
  try {
    return SocketAddress::parse(text);
  } catch (const Error& e) {
    fail(coilInvalidUsage, l.style, ": MASTER_ADDR/MASTER_PORT: ", e.what());
  }
}

SocketAddress rootAddress(const LauncherVars& l, bool underTorchElastic) {
  if (auto commId = env::get("COIL_COMM_ID")) {
    try {
      return SocketAddress::parse(*commId);
    } catch (const Error& e) {
      fail(coilInvalidUsage, "COIL_COMM_ID: ", e.what());
    }
  }
  int64_t port = requiredInt(l, "MASTER_PORT", 1, 65535);
  if (underTorchElastic) {
    // torchrun's own store listens on MASTER_PORT; the root takes the next.
    if (port == 65535)
      fail(coilInvalidUsage, l.style, ": MASTER_PORT=65535 leaves no port for coil's root "
           "(it uses MASTER_PORT+1 under torchrun); set COIL_COMM_ID=host:port");
    ++port;
  }
  return masterAddress(l, port);
}

// torchrun's agent hosts a TCPStore on MASTER_PORT and tells its workers
// to use it (TORCHELASTIC_USE_AGENT_STORE=True, the default). Exchanging
// the id there needs no port of our own next to it. COIL_COMM_ID, when
// set, names a root instead.
std::optional<StoreRendezvous> agentStore(const LauncherVars& l) {
  const std::string use = env::get("TORCHELASTIC_USE_AGENT_STORE").value_or("");
  if (use != "True" && use != "true" && use != "1") return std::nullopt;
  if (env::get("COIL_COMM_ID")) return std::nullopt;
  StoreRendezvous store;
  store.store = masterAddress(l, requiredInt(l, "MASTER_PORT", 1, 65535));
  store.keyPrefix = "/coil/" + env::get("TORCHELASTIC_RUN_ID").value_or("") + "/" +
                    env::get("TORCHELASTIC_RESTART_COUNT").value_or("0");
  return store;
}

}  // namespace

LaunchInfo readLauncherEnv() {
  const LauncherVars* l = nullptr;
  for (const LauncherVars* candidate : {&kTorchrun, &kOpenMpi, &kSlurm})
    if (detected(*candidate)) {
      l = candidate;
      break;
    }
  if (l == nullptr)
    fail(coilInvalidUsage, "no launcher detected: looked for RANK and WORLD_SIZE "
         "(torchrun), OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (Open MPI), SLURM_PROCID and "
         "SLURM_NTASKS (Slurm)");

  LaunchInfo info;
  info.launcher = l->name;
  info.nranks = static_cast<int>(requiredInt(*l, l->sizeVar, 1, INT_MAX));
  info.rank = static_cast<int>(requiredInt(*l, l->rankVar, 0, INT_MAX));
  if (info.rank >= info.nranks)
    fail(coilInvalidUsage, l->style, ": ", l->rankVar, "=", info.rank, " is not below ",
         l->sizeVar, "=", info.nranks);
  try {
    info.localRank = static_cast<int>(env::getInt(l->localRankVar, 0, INT_MAX).value_or(-1));
  } catch (const Error& e) {
    fail(coilInvalidUsage, l->style, ": ", e.what());
  }
  const bool underTorchElastic = l == &kTorchrun && env::get("TORCHELASTIC_RUN_ID").has_value();
  if (underTorchElastic) {
    info.store = agentStore(*l);
    if (info.store) return info;
  }
  SocketAddress root = rootAddress(*l, underTorchElastic);
  info.id = uniqueIdForFixedRoot(root, env::get(l->jobKeyVar).value_or(""));
  return info;
}

}  // namespace coil
