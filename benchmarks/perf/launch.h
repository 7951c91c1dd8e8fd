// How coil_perf's processes and ranks join the run: which launcher started
// this process (if any), and the communicator each of its -t ranks gets.
//
//   no launcher      fork -P processes here (local_ranks.h); id over pipes
//   mpirun           MPI build: MPI_Init, id from rank 0 by MPI_Bcast
//                    otherwise: coilCommInitFromEnv (MASTER_ADDR/PORT)
//   torchrun, Slurm  coilCommInitFromEnv
//
// Each process runs -t ranks, one per thread (nccl-tests' -t): process p's
// thread t is rank p*t_count + t. Threads need an id the process can hand
// them, so -t > 1 works without a launcher and under mpirun with MPI.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "baseline.h"
#include "coil.h"
#include "local_ranks.h"
#include "options.h"

namespace coil_perf {

enum class Launcher { None, Mpirun, Torchrun, Slurm, Hydra };

/// The launcher named by the environment (OMPI_COMM_WORLD_SIZE, then
/// RANK/WORLD_SIZE, then SLURM_PROCID with SLURM_STEP_ID: a task of srun,
/// not an sbatch script or salloc shell, nor a step of hydra's proxies;
/// then PMI_RANK/PMI_SIZE: MPICH's or Intel MPI's mpiexec), with the rank
/// and world size it announces (0 when none). As coilCommInitFromEnv sees
/// it (launcher_env.h), which ranks started by hydra use: an MPI built into
/// coil_perf is Open MPI's, which cannot join a hydra launch.
struct LaunchEnv {
  Launcher launcher = Launcher::None;
  int rank = 0;
  int worldSize = 0;
};
LaunchEnv detectLauncher();

/// Printable name: "fork", "mpirun", "torchrun", "slurm", "mpiexec-hydra".
const char* launcherName(Launcher launcher);

/// This process's part of the run. Owns the forked processes (rank 0's
/// process) and MPI, when used.
class ProcessLaunch {
 public:
  /// Joins the run described by `opts` and the environment: under no
  /// launcher this forks, and returns in every forked process; under mpirun
  /// (MPI builds) it calls MPI_Init. Throws UsageError for inconsistent
  /// flags (-P under a launcher, -t where threads cannot get an id,
  /// --baseline mpi without mpirun or MPI), std::runtime_error if forking
  /// or MPI fail.
  ProcessLaunch(const Options& opts, int* argc, char*** argv);

  /// Gets coil's unique id to every process (collective over processes; a
  /// no-op for launches that use coilCommInitFromEnv). Throws CoilFailure
  /// if rank 0 cannot make one, std::runtime_error if it does not arrive.
  void shareId();
  /// The id shareId() got; nullopt for coilCommInitFromEnv launches.
  const std::optional<coilUniqueId>& id() const { return id_; }

  int process() const { return process_; }
  int processes() const { return processes_; }
  int threads() const { return threads_; }
  Launcher launcher() const { return env_.launcher; }
  /// The MPI world when launched by mpirun from an MPI build, else nullptr.
  MpiWorld* mpi() const { return mpi_.get(); }

  /// Rank 0's process waits for the processes it forked (a few seconds
  /// when `selfFailed`); returns false if one failed. Others: true.
  bool waitForOthers(bool selfFailed);

 private:
  LaunchEnv env_;
  std::unique_ptr<LocalRanks> local_;
  std::unique_ptr<MpiWorld> mpi_;
  std::optional<coilUniqueId> id_;
  int process_ = 0;
  int processes_ = 1;
  int threads_ = 1;
};

/// One rank: a thread of a process. Owns its communicator.
class Participant {
 public:
  Participant(const ProcessLaunch& launch, int thread);
  /// Destroys the communicator if close() was not called.
  ~Participant();
  Participant(const Participant&) = delete;
  Participant& operator=(const Participant&) = delete;

  /// Creates the communicator (collective over all ranks). Throws
  /// CoilFailure if coil fails, std::runtime_error otherwise.
  void connect();

  coilComm_t comm() const { return comm_; }
  /// This rank and the rank count; final once connect() has returned (before
  /// it, what the launcher announced).
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  /// This rank's thread in its process (0 .. -t - 1).
  int thread() const { return thread_; }
  Launcher launcher() const { return launch_.launcher(); }
  /// The MPI world when launched by mpirun from an MPI build, else nullptr.
  MpiWorld* mpi() const { return launch_.mpi(); }

  /// Destroys the communicator. Throws CoilFailure if coil reports an error.
  void close();

 private:
  void connectFromEnv();

  const ProcessLaunch& launch_;
  int thread_;
  coilComm_t comm_ = nullptr;
  int rank_ = 0;
  int nranks_ = 1;
};

}  // namespace coil_perf
