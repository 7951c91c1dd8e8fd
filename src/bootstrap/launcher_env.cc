#include "bootstrap/launcher_env.h"

#include <array>
#include <climits>
#include <limits>

#include "bootstrap/slurm_nodelist.h"
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
  const char* localSizeVar;   // ranks on this host; nullptr: not told
  // Where the job's id is, first found wins; nullptr ends the list (the
  // launcher may name no job at all).
  std::array<const char*, 2> jobKeyVars;
  // How to hand MASTER_ADDR and MASTER_PORT to every rank, for messages.
  const char* exportHint;
};

constexpr LauncherVars kTorchrun{"torchrun", "torchrun-style launch", "RANK", "WORLD_SIZE",
                                 "LOCAL_RANK", nullptr, {"TORCHELASTIC_RUN_ID", nullptr}, ""};
// Open MPI 4 names the job in OMPI_MCA_ess_base_jobid, Open MPI 5 (PRRTE)
// only in PMIX_NAMESPACE.
constexpr LauncherVars kOpenMpi{"Open MPI", "Open MPI launch", "OMPI_COMM_WORLD_RANK",
                                "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                "OMPI_COMM_WORLD_LOCAL_SIZE",
                                {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"},
                                "mpirun -x MASTER_ADDR=<rank 0's host> -x MASTER_PORT=<port>"};
// MPICH's and Intel MPI's mpiexec (the hydra process manager); it names no
// job in the environment.
constexpr LauncherVars kHydra{"MPICH hydra", "mpiexec (MPICH/Intel MPI hydra) launch",
                              "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
                              {nullptr, nullptr},
                              "mpiexec -genv MASTER_ADDR <rank 0's host> -genv MASTER_PORT <port>"};
constexpr LauncherVars kSlurm{"Slurm", "Slurm launch", "SLURM_PROCID", "SLURM_NTASKS",
                              "SLURM_LOCALID", nullptr, {"SLURM_JOB_ID", nullptr}, ""};

std::string jobKey(const LauncherVars& l) {
  for (const char* var : l.jobKeyVars) {
    if (var == nullptr) break;
    if (auto v = env::get(var)) return *v;
  }
  return "";
}

bool setsRankOrSize(const LauncherVars& l) {
  return env::get(l.rankVar).has_value() || env::get(l.sizeVar).has_value();
}

// The variable that holds srun's step id (SLURM_STEPID, its older name, is
// set beside it), or nullptr. An sbatch script and an salloc shell have
// SLURM_NTASKS (and the batch script SLURM_PROCID=0) but no step id: they
// are not tasks of a parallel launch.
const char* slurmStepVar() {
  for (const char* var : {"SLURM_STEP_ID", "SLURM_STEPID"})
    if (env::get(var)) return var;
  return nullptr;
}

// hydra (MPICH's and Intel MPI's process manager) says how many ranks
// share the host; Slurm's PMI plugins (srun --mpi=pmi2), which set PMI_RANK
// and PMI_SIZE too, do not.
bool hasHydrasLocalVars() {
  return env::get(kHydra.localSizeVar).has_value() || env::get(kHydra.localRankVar).has_value();
}

// Order matters where launchers nest. mpiexec (hydra) inside an sbatch job
// starts one proxy per node with srun: the ranks inherit that step's
// SLURM_PROCID (the node's index), SLURM_NTASKS and SLURM_STEP_ID, so hydra
// goes before Slurm. Under `srun --mpi=pmi2` the PMI_* variables are
// Slurm's own, and Slurm's defaults apply. The choice must not depend on
// the rank: every rank must pick the same launcher.
bool detected(const LauncherVars& l) {
  if (&l == &kHydra) return setsRankOrSize(l) && (hasHydrasLocalVars() || !slurmStepVar());
  if (&l == &kSlurm) return setsRankOrSize(l) && slurmStepVar() != nullptr;
  return setsRankOrSize(l);
}

// "(RANK and WORLD_SIZE are set)"-style reminder of why we chose this launcher.
std::string why(const LauncherVars& l) {
  bool rank = env::get(l.rankVar).has_value(), size = env::get(l.sizeVar).has_value();
  if (rank && size) return std::string(" (") + l.rankVar + " and " + l.sizeVar + " are set)";
  return std::string(" (") + (rank ? l.rankVar : l.sizeVar) + " is set)";
}

// `var` as an integer in [lo, hi], or nothing when unset; a malformed value
// is named with the launcher.
std::optional<int64_t> optionalInt(const LauncherVars& l, const char* var, int64_t lo,
                                   int64_t hi) {
  try {
    return env::getInt(var, lo, hi);
  } catch (const Error& e) {
    fail(coilInvalidUsage, l.style, ": ", e.what());
  }
}

int64_t requiredInt(const LauncherVars& l, const char* var, int64_t lo, int64_t hi) {
  std::optional<int64_t> v = optionalInt(l, var, lo, hi);
  if (!v) fail(coilInvalidUsage, l.style, " needs ", var, why(l));
  return *v;
}

std::string required(const LauncherVars& l, const char* var) {
  auto v = env::get(var);
  if (!v) fail(coilInvalidUsage, l.style, " needs ", var, why(l));
  return *v;
}

// `host` (a name, an IPv4 or a bare IPv6 address) and `port`; `from` says
// where they came from in the message when they do not parse or resolve.
SocketAddress hostAndPort(const LauncherVars& l, const std::string& host, int64_t port,
                          const char* from) {
  bool ipv6Literal = host.find(':') != std::string::npos && host.front() != '[';
  std::string text = (ipv6Literal ? "[" + host + "]" : host) + ":" + std::to_string(port);
  try {
    return SocketAddress::parse(text);
  } catch (const Error& e) {
    fail(coilInvalidUsage, l.style, ": ", from, ": ", e.what());
  }
}

SocketAddress masterAddress(const LauncherVars& l, int64_t port) {
  return hostAndPort(l, required(l, "MASTER_ADDR"), port, "MASTER_ADDR/MASTER_PORT");
}

// Under srun MASTER_ADDR and MASTER_PORT may be left out: the root then
// listens on the step's first node, where task 0 runs (Slurm's block, cyclic
// and plane distributions all start there), on a port from the job and
// step ids.
SocketAddress slurmRoot(int rank) {
  const char* listVar = nullptr;
  std::optional<std::string> list;
  for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
    if ((list = env::get(var))) {
      listVar = var;
      break;
    }
  std::string host;
  const char* from = "MASTER_ADDR";
  if (auto given = env::get("MASTER_ADDR")) {
    host = *given;
  } else if (!list) {
    fail(coilInvalidUsage, kSlurm.style,
         " needs MASTER_ADDR, or SLURM_STEP_NODELIST to take its first node from", why(kSlurm));
  } else {
    try {
      host = firstSlurmHost(*list);
    } catch (const Error& e) {
      fail(coilInvalidUsage, kSlurm.style, ": ", listVar, "='", *list, "': ", e.what(),
           "; set MASTER_ADDR to rank 0's host");
    }
    auto node = env::get("SLURMD_NODENAME");
    if (rank == 0 && node && *node != host)
      fail(coilInvalidUsage, kSlurm.style, ": rank 0 runs on ", *node, ", not on ", host,
           ", the first node of ", listVar, " where the other ranks look for it (a task "
           "distribution such as srun -m arbitrary); set MASTER_ADDR to rank 0's host");
    from = "the step's first node (set MASTER_ADDR instead)";
  }
  int64_t port = 0;
  if (env::get("MASTER_PORT")) {
    port = requiredInt(kSlurm, "MASTER_PORT", 1, 65535);
  } else {
    const int64_t maxId = std::numeric_limits<int64_t>::max();
    port = slurmStepPort(requiredInt(kSlurm, "SLURM_JOB_ID", 0, maxId),
                         requiredInt(kSlurm, slurmStepVar(), 0, maxId));
  }
  return hostAndPort(kSlurm, host, port, from);
}

// Under mpirun or mpiexec MASTER_ADDR may be left out when every rank runs
// on this host (the launcher's local size is the world size, `nranks`): the
// root then listens on loopback. MASTER_PORT may be left out when the
// launcher names the job (Open MPI does, hydra does not): the port comes
// from the job id, the same on every rank and different for concurrent jobs.
SocketAddress mpiLauncherRoot(const LauncherVars& l, int nranks) {
  std::string host;
  const char* from = "MASTER_ADDR/MASTER_PORT";
  if (auto given = env::get("MASTER_ADDR")) {
    host = *given;
  } else {
    std::optional<int64_t> local = optionalInt(l, l.localSizeVar, 1, INT_MAX);
    if (!local)
      fail(coilInvalidUsage, l.style, " needs MASTER_ADDR, rank 0's host (", l.localSizeVar,
           " is not set, so whether all ranks share this host is unknown): ", l.exportHint);
    if (*local != nranks)
      fail(coilInvalidUsage, l.style, " needs MASTER_ADDR, rank 0's host: the ranks run on "
           "more than one host (", l.localSizeVar, "=", *local, ", ", l.sizeVar, "=", nranks,
           "): ", l.exportHint);
    host = "127.0.0.1";
    from = "loopback, as every rank runs on this host (set MASTER_ADDR instead)";
  }
  if (env::get("MASTER_PORT"))
    return hostAndPort(l, host, requiredInt(l, "MASTER_PORT", 1, 65535), from);
  const std::string job = jobKey(l);
  if (job.empty())
    fail(coilInvalidUsage, l.style, " needs MASTER_PORT: no job id to take a port from (",
         l.name, " sets none, or its variable is missing): ", l.exportHint);
  return hostAndPort(l, host, launcherJobPort(job), from);
}

SocketAddress rootAddress(const LauncherVars& l, bool underTorchElastic, int rank, int nranks) {
  if (auto commId = env::get("COIL_COMM_ID")) {
    try {
      return SocketAddress::parse(*commId);
    } catch (const Error& e) {
      fail(coilInvalidUsage, "COIL_COMM_ID: ", e.what());
    }
  }
  if (&l == &kSlurm) return slurmRoot(rank);
  if (&l == &kOpenMpi || &l == &kHydra) return mpiLauncherRoot(l, nranks);
  const int64_t port = requiredInt(l, "MASTER_PORT", 1, 65535);
  if (underTorchElastic) {
    // torchrun without its agent's store for the workers (torch 2.4's c10d
    // rendezvous, --standalone too): MASTER_PORT is a free port torchrun
    // found with bind(0), and a worker's torch may host its store there.
    // Not MASTER_PORT+1: the kernel gives bind(0) odd ports and connect()
    // even ones, so the port after MASTER_PORT is where torchrun's own
    // store connections take their local ports ("Address already in use"
    // in one launch of 12). A port from the run and MASTER_PORT instead,
    // the same on every rank, in 20000-31999: below the kernel's ephemeral
    // range (32768-60999 by default), which neither kind of port leaves.
    return masterAddress(l, launcherJobPort(jobKey(l) + ":" + std::to_string(port)));
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
  for (const LauncherVars* candidate : {&kTorchrun, &kOpenMpi, &kHydra, &kSlurm})
    if (detected(*candidate)) {
      l = candidate;
      break;
    }
  if (l == nullptr && setsRankOrSize(kSlurm))
    fail(coilInvalidUsage, "no launcher detected: ", kSlurm.rankVar, " or ", kSlurm.sizeVar,
         " is set but SLURM_STEP_ID is not, so this process is a Slurm batch script or salloc "
         "shell, not one of the tasks srun starts: start the ranks with srun (or torchrun or "
         "mpirun)");
  if (l == nullptr)
    fail(coilInvalidUsage, "no launcher detected: looked for RANK and WORLD_SIZE "
         "(torchrun), OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (Open MPI), SLURM_PROCID and "
         "SLURM_NTASKS with SLURM_STEP_ID (a task of srun), PMI_RANK and PMI_SIZE (MPICH or "
         "Intel MPI mpiexec)");

  LaunchInfo info;
  info.launcher = l->name;
  info.nranks = static_cast<int>(requiredInt(*l, l->sizeVar, 1, INT_MAX));
  info.rank = static_cast<int>(requiredInt(*l, l->rankVar, 0, INT_MAX));
  if (info.rank >= info.nranks)
    fail(coilInvalidUsage, l->style, ": ", l->rankVar, "=", info.rank, " is not below ",
         l->sizeVar, "=", info.nranks);
  info.localRank = static_cast<int>(optionalInt(*l, l->localRankVar, 0, INT_MAX).value_or(-1));
  const bool underTorchElastic = l == &kTorchrun && env::get("TORCHELASTIC_RUN_ID").has_value();
  if (underTorchElastic) {
    info.store = agentStore(*l);
    if (info.store) return info;
  }
  SocketAddress root = rootAddress(*l, underTorchElastic, info.rank, info.nranks);
  info.id = uniqueIdForFixedRoot(root, jobKey(*l));
  return info;
}

int launcherJobPort(std::string_view jobKey) {
  // FNV-1a: the same on every rank and every build, unlike std::hash.
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : jobKey) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return 20000 + static_cast<int>(h % 12000);
}

int slurmStepPort(uint64_t jobId, uint64_t stepId) {
  // 750 jobs x 16 steps: jobs 750 apart, or steps 16 apart, share a port.
  return 20000 + static_cast<int>(jobId % 750 * 16 + stepId % 16);
}

}  // namespace coil
