// How this coil_perf process joins the run: which launcher started it (if
// any), and the communicator it gets.
//
//   no launcher      fork -N ranks here (local_ranks.h); id over pipes
//   mpirun           MPI build: MPI_Init, id from rank 0 by MPI_Bcast
//                    otherwise: coilCommInitFromEnv (MASTER_ADDR/PORT)
//   torchrun, Slurm  coilCommInitFromEnv
#pragma once

#include <memory>
#include <string>

#include "baseline.h"
#include "coil.h"
#include "local_ranks.h"
#include "options.h"

namespace coil_perf {

enum class Launcher { None, Mpirun, Torchrun, Slurm };

/// The launcher named by the environment (OMPI_COMM_WORLD_SIZE, then
/// RANK/WORLD_SIZE, then SLURM_PROCID), with the rank and world size it
/// announces (0 when none).
struct LaunchEnv {
  Launcher launcher = Launcher::None;
  int rank = 0;
  int worldSize = 0;
};
LaunchEnv detectLauncher();

/// Printable name: "fork", "mpirun", "torchrun", "slurm".
const char* launcherName(Launcher launcher);

/// One rank of the run. Owns its communicator (and MPI, when used).
class Participant {
 public:
  /// Joins the run described by `opts` and the environment: under no
  /// launcher this forks, and returns in every forked rank; under mpirun
  /// (MPI builds) it calls MPI_Init. Throws UsageError for inconsistent
  /// flags (-N under a launcher, --baseline mpi without mpirun or MPI),
  /// std::runtime_error if forking or MPI fail.
  Participant(const Options& opts, int* argc, char*** argv);
  /// Destroys the communicator if close() was not called.
  ~Participant();

  /// Creates the communicator (collective over all ranks). Throws
  /// CoilFailure if coil fails, std::runtime_error otherwise.
  void connect();

  coilComm_t comm() const { return comm_; }
  /// This rank and the rank count; final once connect() has returned (before
  /// it, what the launcher announced).
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  Launcher launcher() const { return env_.launcher; }
  /// The MPI world when launched by mpirun from an MPI build, else nullptr.
  MpiWorld* mpi() const { return mpi_.get(); }

  /// Destroys the communicator (throws CoilFailure if coil reports an
  /// error), then, on rank 0 of a forked run, waits for the other ranks.
  /// Returns false if another rank failed. `selfFailed` shortens the wait.
  bool close(bool selfFailed);

 private:
  void connectForked();
  void connectWithMpi();
  void connectFromEnv();

  LaunchEnv env_;
  std::unique_ptr<LocalRanks> local_;
  std::unique_ptr<MpiWorld> mpi_;
  coilComm_t comm_ = nullptr;
  int rank_ = 0;
  int nranks_ = 1;
};

}  // namespace coil_perf
