// coilCommInitFromEnv's view of the launcher: which rank this process is,
// how many there are, and where the rendezvous root listens, read from the
// variables torchrun, Open MPI's mpirun, Slurm's srun or MPICH's and Intel
// MPI's mpiexec (hydra) set.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "bootstrap/bootstrap.h"

namespace coil {

/// Where torchrun's agent keeps its store, and the key prefix under which
/// rank 0 publishes coil's unique id (store_rendezvous.h).
struct StoreRendezvous {
  SocketAddress store;
  std::string keyPrefix;  // "/coil/<TORCHELASTIC_RUN_ID>/<TORCHELASTIC_RESTART_COUNT>"
};

struct LaunchInfo {
  int rank = -1;
  int nranks = 0;
  int localRank = -1;    // rank among the processes on this host; -1: not told
  UniqueIdData id;       // fixed root (rootHostedByRank0): rank 0 hosts it
  /// Set instead of `id` under torchrun with the agent's store: the id is
  /// exchanged through that store.
  std::optional<StoreRendezvous> store;
  std::string launcher;  // "torchrun", "Open MPI", "Slurm" or "MPICH hydra"
};

/// Reads the launcher's environment. Detection order:
///  - torchrun (RANK or WORLD_SIZE set): RANK, WORLD_SIZE, LOCAL_RANK
///    (optional), MASTER_ADDR, MASTER_PORT. Under torchrun proper
///    (TORCHELASTIC_RUN_ID set) the agent's store listens on MASTER_PORT:
///    with TORCHELASTIC_USE_AGENT_STORE=True (torchrun's default) the id is
///    exchanged through that store (`store` is set); otherwise the root
///    listens on MASTER_ADDR at launcherJobPort(TORCHELASTIC_RUN_ID and
///    MASTER_PORT); job key TORCHELASTIC_RUN_ID.
///  - Open MPI (OMPI_COMM_WORLD_RANK or _SIZE set): OMPI_COMM_WORLD_RANK,
///    OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (optional); job key
///    OMPI_MCA_ess_base_jobid, else PMIX_NAMESPACE (Open MPI 5).
///    MASTER_ADDR defaults to 127.0.0.1 when OMPI_COMM_WORLD_LOCAL_SIZE is
///    the world size (one host), MASTER_PORT to launcherJobPort(job key).
///  - MPICH or Intel MPI hydra (PMI_RANK or PMI_SIZE set, with hydra's
///    MPI_LOCALNRANKS or MPI_LOCALRANKID, or outside any srun step; checked
///    before Slurm, as hydra inside an sbatch job starts its proxies with
///    srun, whose SLURM_* its ranks inherit): PMI_RANK, PMI_SIZE,
///    MPI_LOCALRANKID (optional), MASTER_PORT; no job key. MASTER_ADDR
///    defaults to 127.0.0.1 when MPI_LOCALNRANKS is PMI_SIZE. Without those
///    marks inside a step, PMI_* are Slurm's own (srun --mpi=pmi2): Slurm.
///  - Slurm (SLURM_PROCID or SLURM_NTASKS set, and a step id: SLURM_STEP_ID
///    or SLURM_STEPID; an sbatch script or salloc shell has none and is an
///    error): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (optional); job key
///    SLURM_JOB_ID. MASTER_ADDR defaults to the step's first node,
///    MASTER_PORT to slurmStepPort.
/// COIL_COMM_ID=host:port, if set, is the root address instead of
/// MASTER_ADDR/MASTER_PORT (and used as given, without the +1).
/// The id comes from uniqueIdForFixedRoot; its key material from COIL_SECRET,
/// else the per-user secret file, else nothing (a WARN line says so): see
/// fixed_root_secret.h. An unusable secret file gives coilInvalidUsage or
/// coilSystemError naming it.
/// A missing or malformed variable, or no launcher at all, gives
/// coilInvalidUsage naming the variables and the launcher.
LaunchInfo readLauncherEnv();

/// The root's port for an mpirun job without MASTER_PORT: from the job's id
/// (any text), in [20000, 32000), as slurmStepPort's.
int launcherJobPort(std::string_view jobKey);

/// The root's port for an srun step without MASTER_PORT: from the job and
/// step ids, in [20000, 32000) (below Linux's ephemeral ports, 32768 on),
/// different for the steps of one job and for neighbouring jobs.
int slurmStepPort(uint64_t jobId, uint64_t stepId);

}  // namespace coil
