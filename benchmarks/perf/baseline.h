// Open MPI inside coil_perf: as the launcher's channel for coil's unique id,
// and as the reference all-reduce (--baseline mpi).
//
// Meson compiles exactly one of baseline_mpi.cc (built with MPI) and
// baseline_mpi_absent.cc (built without); both define the functions below,
// so the rest of coil_perf has no MPI-specific code paths.
#pragma once

#include <cstddef>
#include <memory>

#include "coil.h"

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
  /// Why MPI_Allreduce cannot run (type, op) ("MPI has no fp16"), or
  /// nullptr when it can.
  virtual const char* unsupported(coilDataType_t type, coilRedOp_t op) const = 0;
  /// Runs MPI_Allreduce(send, recv, count) `warmup` times untimed, then
  /// `iters` times timed after an MPI_Barrier, and returns this rank's
  /// average seconds per call. (type, op) must be supported.
  virtual double timeAllreduce(const void* send, void* recv, size_t count, coilDataType_t type,
                               coilRedOp_t op, int warmup, int iters) = 0;
};

/// True when this coil_perf was built with MPI.
bool mpiBuiltIn();

/// Calls MPI_Init and returns the world. Only for processes started by
/// mpirun, and only in MPI builds (throws std::logic_error otherwise).
std::unique_ptr<MpiWorld> startMpi(int* argc, char*** argv);

}  // namespace coil_perf
