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
  if (envSet("SLURM_PROCID")) return {Launcher::Slurm, envInt("SLURM_PROCID"), envInt("SLURM_NTASKS")};
  return {};
}

const char* launcherName(Launcher launcher) {
  switch (launcher) {
    case Launcher::None: return "fork";
    case Launcher::Mpirun: return "mpirun";
    case Launcher::Torchrun: return "torchrun";
    case Launcher::Slurm: return "slurm";
  }
  return "?";
}

Participant::Participant(const Options& opts, int* argc, char*** argv) : env_(detectLauncher()) {
  if (opts.baselineMpi && !mpiBuiltIn()) {
    throw UsageError("--baseline mpi: coil_perf was built without MPI");
  }
  if (opts.baselineMpi && env_.launcher != Launcher::Mpirun) {
    throw UsageError("--baseline mpi: start coil_perf with mpirun, e.g. "
                     "mpirun -np 4 coil_perf --baseline mpi");
  }
  if (env_.launcher != Launcher::None && opts.nranks != 0 && opts.nranks != env_.worldSize) {
    throw UsageError(std::string("-N ") + std::to_string(opts.nranks) + ": the number of ranks is set by " +
                     launcherName(env_.launcher) + " (" + std::to_string(env_.worldSize) +
                     "); leave -N out");
  }
  rank_ = env_.rank;
  nranks_ = env_.worldSize;
  if (env_.launcher == Launcher::None) {
    nranks_ = opts.nranks > 0 ? opts.nranks : 2;
    local_ = std::make_unique<LocalRanks>(nranks_);
    rank_ = local_->rank();
  } else if (env_.launcher == Launcher::Mpirun && mpiBuiltIn()) {
    mpi_ = startMpi(argc, argv);
    rank_ = mpi_->rank();
    nranks_ = mpi_->size();
  }
}

void Participant::connect() {
  if (local_) {
    connectForked();
  } else if (mpi_) {
    connectWithMpi();
  } else {
    connectFromEnv();
  }
}

Participant::~Participant() {
  if (comm_ != nullptr) coilCommDestroy(comm_);
}

void Participant::connectForked() {
  coilUniqueId id;
  if (rank_ == 0) {
    const coilResult_t r = coilGetUniqueId(&id);
    if (r != coilSuccess) {
      local_->abandon();
      coilCheck(r, "coilGetUniqueId", nullptr);
    }
    local_->share(&id, sizeof(id));
  } else {
    local_->receive(&id, sizeof(id));
  }
  // NULL: on failure there is no comm; the message is the thread's.
  coilCheck(coilCommInitRank(&comm_, nranks_, id, rank_), "coilCommInitRank", nullptr);
}

void Participant::connectWithMpi() {
  // Rank 0's status travels with the id, so a failed coilGetUniqueId stops
  // every rank instead of leaving them waiting for a root that never came.
  struct {
    int32_t result;
    coilUniqueId id;
  } shared;
  std::memset(&shared, 0, sizeof(shared));
  if (rank_ == 0) shared.result = coilGetUniqueId(&shared.id);
  mpi_->broadcastFromRoot(&shared, sizeof(shared));
  if (shared.result != coilSuccess) {
    if (rank_ == 0) coilCheck(static_cast<coilResult_t>(shared.result), "coilGetUniqueId", nullptr);
    throw CoilFailure("coilGetUniqueId failed on rank 0", static_cast<coilResult_t>(shared.result));
  }
  coilCheck(coilCommInitRank(&comm_, nranks_, shared.id, rank_), "coilCommInitRank", nullptr);
}

void Participant::connectFromEnv() {
  const coilResult_t r = coilCommInitFromEnv(&comm_);
  if (r != coilSuccess) {
    std::string hint;
    if (!envSet("MASTER_ADDR") && !envSet("COIL_COMM_ID")) {
      hint = " (hint: export MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 to every rank";
      hint += env_.launcher == Launcher::Mpirun ? ", e.g. mpirun -x MASTER_ADDR -x MASTER_PORT)" : ")";
    }
    throw CoilFailure(describeFailure(r, "coilCommInitFromEnv", nullptr) + hint, r);
  }
  coilCheck(coilCommUserRank(comm_, &rank_), "coilCommUserRank", comm_);
  coilCheck(coilCommCount(comm_, &nranks_), "coilCommCount", comm_);
}

bool Participant::close(bool selfFailed) {
  coilResult_t destroyed = coilSuccess;
  std::string failure;
  if (comm_ != nullptr) {
    destroyed = coilCommDestroy(comm_);
    comm_ = nullptr;
    if (destroyed != coilSuccess) failure = describeFailure(destroyed, "coilCommDestroy", nullptr);
  }
  const bool failed = selfFailed || destroyed != coilSuccess;
  const bool othersOk = local_ ? local_->waitForChildren(failed) : true;
  if (destroyed != coilSuccess) throw CoilFailure(failure, destroyed);
  return othersOk;
}

}  // namespace coil_perf
