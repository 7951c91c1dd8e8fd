#include "launch.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "coil_calls.h"
#include "units.h"

namespace coil_perf {
namespace {

int envInt(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : 0;
}
bool envSet(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

}  // namespace

LaunchEnv detectLauncher() {
  if (envSet("OMPI_COMM_WORLD_SIZE")) {
    return {Launcher::Mpirun, envInt("OMPI_COMM_WORLD_RANK"), envInt("OMPI_COMM_WORLD_SIZE")};
  }
  if (envSet("RANK") && envSet("WORLD_SIZE")) {
    return {Launcher::Torchrun, envInt("RANK"), envInt("WORLD_SIZE")};
  }
  // hydra (MPICH's, Intel MPI's mpiexec) goes before Slurm: inside an
  // sbatch job it starts its proxies with srun, and the ranks inherit that
  // step's SLURM_* variables. Slurm's own PMI (srun --mpi=pmi2) sets PMI_*
  // without MPI_LOCAL*. A task of srun has a step id; an sbatch script or
  // salloc shell has SLURM_PROCID and SLURM_NTASKS without one, and forks
  // its ranks like any shell.
  const bool slurmStep = envSet("SLURM_STEP_ID") || envSet("SLURM_STEPID");
  const bool hydraMarks = envSet("MPI_LOCALNRANKS") || envSet("MPI_LOCALRANKID");
  if (envSet("PMI_RANK") && envSet("PMI_SIZE") && (hydraMarks || !slurmStep))
    return {Launcher::Hydra, envInt("PMI_RANK"), envInt("PMI_SIZE")};
  if (envSet("SLURM_PROCID") && slurmStep)
    return {Launcher::Slurm, envInt("SLURM_PROCID"), envInt("SLURM_NTASKS")};
  return {};
}

const char* launcherName(Launcher launcher) {
  switch (launcher) {
    case Launcher::None: return "fork";
    case Launcher::Mpirun: return "mpirun";
    case Launcher::Torchrun: return "torchrun";
    case Launcher::Slurm: return "slurm";
    case Launcher::Hydra: return "mpiexec-hydra";
  }
  return "?";
}

namespace {

// The launcher that starts the MPI library coil_perf was built with.
Launcher launcherOf(MpiFamily family) {
  switch (family) {
    case MpiFamily::OpenMpi: return Launcher::Mpirun;
    case MpiFamily::Mpich: return Launcher::Hydra;
    default: return Launcher::None;
  }
}

}  // namespace

ProcessLaunch::ProcessLaunch(const Options& opts, int* argc, char*** argv)
    : env_(detectLauncher()), threads_(opts.threads) {
  if (opts.baselineMpi && !mpiBuiltIn()) {
    throw UsageError("--baseline mpi: coil_perf was built without MPI");
  }
  // MPI_Init joins only a launch of the library's own process manager;
  // under another launcher coil_perf starts through coilCommInitFromEnv.
  const MpiFamily family = builtInMpiFamily();
  const Launcher own = launcherOf(family);  // None without MPI
  const bool mpiStarts = own != Launcher::None && env_.launcher == own;
  if (opts.baselineMpi && !mpiStarts) {
    const char* how = family == MpiFamily::Mpich ? "MPICH's or Intel MPI's mpiexec, e.g. "
                                                   "mpiexec -n 4 coil_perf --baseline mpi"
                                                 : "Open MPI's mpirun, e.g. mpirun -np 4 "
                                                   "coil_perf --baseline mpi";
    throw UsageError(std::string("--baseline mpi: coil_perf was built with ") +
                     mpiFamilyName(family) + "; start it with " + how);
  }
  if (env_.launcher != Launcher::None && opts.nprocs != 0 && opts.nprocs != env_.worldSize) {
    throw UsageError(std::string("-P ") + std::to_string(opts.nprocs) +
                     ": the number of processes is set by " + launcherName(env_.launcher) + " (" +
                     std::to_string(env_.worldSize) + "); leave -P out");
  }
  const bool idFromProcess = env_.launcher == Launcher::None || mpiStarts;
  if (threads_ > 1 && !idFromProcess) {
    throw UsageError(std::string("-t ") + std::to_string(threads_) + ": under " +
                     launcherName(env_.launcher) +
                     " each process is one rank (coilCommInitFromEnv); start more processes "
                     "instead, or run -t without a launcher" +
                     (own == Launcher::None ? std::string()
                                            : std::string(" or under ") + launcherName(own) +
                                                  " (coil_perf's MPI is " +
                                                  mpiFamilyName(family) + ")"));
  }
  process_ = env_.rank;
  processes_ = env_.worldSize;
  if (env_.launcher == Launcher::None) {
    // nccl-tests' -t alone runs that many ranks in one process.
    processes_ = opts.nprocs > 0 ? opts.nprocs : threads_ > 1 ? 1 : 2;
    if (processes_ > 1) {
      local_ = std::make_unique<LocalRanks>(processes_);
      process_ = local_->rank();
    } else {
      process_ = 0;
    }
  } else if (mpiStarts) {
    mpi_ = startMpi(argc, argv);
    process_ = mpi_->rank();
    processes_ = mpi_->size();
  }
}

void ProcessLaunch::shareId() {
  if (env_.launcher == Launcher::None) {
    coilUniqueId id;
    if (process_ == 0) {
      const coilResult_t r = coilGetUniqueId(&id);
      if (r != coilSuccess) {
        if (local_) local_->abandon();
        coilCheck(r, "coilGetUniqueId", nullptr);
      }
      if (local_) local_->share(&id, sizeof(id));
    } else {
      local_->receive(&id, sizeof(id));
    }
    id_ = id;
  } else if (mpi_) {
    // Rank 0's status travels with the id, so a failed coilGetUniqueId stops
    // every rank instead of leaving them waiting for a root that never came.
    struct {
      int32_t result;
      coilUniqueId id;
    } shared;
    std::memset(&shared, 0, sizeof(shared));
    if (process_ == 0) shared.result = coilGetUniqueId(&shared.id);
    mpi_->broadcastFromRoot(&shared, sizeof(shared));
    if (shared.result != coilSuccess) {
      if (process_ == 0) coilCheck(static_cast<coilResult_t>(shared.result), "coilGetUniqueId", nullptr);
      throw CoilFailure("coilGetUniqueId failed on rank 0", static_cast<coilResult_t>(shared.result));
    }
    id_ = shared.id;
  }
}

bool ProcessLaunch::waitForOthers(bool selfFailed) {
  return local_ ? local_->waitForChildren(selfFailed) : true;
}

Participant::Participant(const ProcessLaunch& launch, int thread)
    : launch_(launch),
      thread_(thread),
      rank_(launch.process() * launch.threads() + thread),
      nranks_(launch.processes() * launch.threads()) {}

Participant::~Participant() {
  if (comm_ != nullptr) coilCommDestroy(comm_);
}

void Participant::connect() {
  if (!launch_.id()) return connectFromEnv();
  // NULL: on failure there is no comm; the message is the thread's.
  coilCheck(coilCommInitRank(&comm_, nranks_, *launch_.id(), rank_), "coilCommInitRank", nullptr);
}

void Participant::connectFromEnv() {
  const coilResult_t r = coilCommInitFromEnv(&comm_);
  if (r != coilSuccess) {
    // The message names the variables and how to pass them under each
    // launcher (launcher_env.cc).
    throw CoilFailure(describeFailure(r, "coilCommInitFromEnv", nullptr), r);
  }
  coilCheck(coilCommUserRank(comm_, &rank_), "coilCommUserRank", comm_);
  coilCheck(coilCommCount(comm_, &nranks_), "coilCommCount", comm_);
}

void Participant::close() {
  if (comm_ == nullptr) return;
  const coilResult_t destroyed = coilCommDestroy(comm_);
  comm_ = nullptr;
  if (destroyed != coilSuccess) {
    throw CoilFailure(describeFailure(destroyed, "coilCommDestroy", nullptr), destroyed);
  }
}

}  // namespace coil_perf
