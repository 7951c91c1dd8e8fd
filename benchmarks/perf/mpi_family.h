// Which MPI library coil_perf was built with decides which launcher can
// start it: an MPI library joins only launches of its own process manager
// (Open MPI's under mpirun, MPICH's under hydra), and elsewhere MPI_Init
// makes each process a world of one.
#pragma once

namespace coil_perf {

enum class MpiFamily {
  None,     // built without MPI
  OpenMpi,  // Open MPI: started by its mpirun (OMPI_COMM_WORLD_*)
  Mpich,    // MPICH and its derivatives, Intel MPI and MVAPICH: mpiexec (hydra, PMI_*)
  Other,    // another MPI: coil_perf does not start it
};

/// The family a library version text names (MPI_Get_library_version's).
MpiFamily mpiFamilyOf(const char* libraryVersion);

/// "Open MPI", "MPICH", ... for messages.
const char* mpiFamilyName(MpiFamily family);

}  // namespace coil_perf
