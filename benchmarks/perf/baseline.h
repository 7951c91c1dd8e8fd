// The MPI coil_perf was built with (Open MPI, or MPICH and its kin: Intel
// MPI, MVAPICH) inside coil_perf: as the launcher's channel for coil's unique id,
// and as the reference implementation of each collective (--baseline mpi):
//   allreduce MPI_Allreduce, broadcast MPI_Bcast, reduce MPI_Reduce,
//   allgather MPI_Allgather, reducescatter MPI_Reduce_scatter_block,
//   alltoall MPI_Alltoall, gather MPI_Gather, scatter MPI_Scatter,
//   sendrecv MPI_Sendrecv (to rank+1, from rank-1).
//
// Meson compiles exactly one of baseline_mpi.cc (built with MPI) and
// baseline_mpi_absent.cc (built without); both define the functions below,
// so the rest of coil_perf has no MPI-specific code paths.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "coil.h"
#include "collectives.h"
#include "mpi_family.h"

namespace coil_perf {

/// MPI_COMM_WORLD of an mpirun launch. MPI is finalised when it is destroyed.
class MpiWorld {
 public:
  virtual ~MpiWorld() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Copies `bytes` bytes at rank 0's `data` to every rank's `data`.
  /// Throws std::runtime_error if MPI fails.
  virtual void broadcastFromRoot(void* data, size_t bytes) = 0;
  /// Why MPI cannot run `call` ("MPI has no fp16 reduction"), or nullptr
  /// when it can. Collectives that only copy run every type (as bytes).
  virtual const char* unsupported(const CollCall& call) const = 0;
  /// Runs MPI's equivalent of `call` `warmup` times untimed, then `iters`
  /// times timed after an MPI_Barrier, and returns this rank's average
  /// seconds per call. `call` must be supported. Throws std::runtime_error
  /// if MPI fails or a count exceeds INT_MAX.
  virtual double timeCollective(const CollCall& call, int warmup, int iters) = 0;
};

/// True when this coil_perf was built with MPI.
bool mpiBuiltIn();

/// The first line of MPI_Get_library_version ("Open MPI v4.1.4, ...",
/// "MPICH Version: 4.0.2"), which MPI allows before MPI_Init; "" without MPI.
std::string mpiLibraryVersion();
/// The family of the linked MPI library (None without MPI).
MpiFamily builtInMpiFamily();

/// Calls MPI_Init and returns the world. Only for processes started by the
/// library's own launcher, and only in MPI builds (throws std::logic_error
/// otherwise).
std::unique_ptr<MpiWorld> startMpi(int* argc, char*** argv);

}  // namespace coil_perf
