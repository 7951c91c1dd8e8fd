#include "mpi_family.h"

#include <cstring>

namespace coil_perf {

MpiFamily mpiFamilyOf(const char* libraryVersion) {
  if (libraryVersion == nullptr) return MpiFamily::Other;
  auto has = [libraryVersion](const char* word) { return std::strstr(libraryVersion, word); };
  if (has("Open MPI")) return MpiFamily::OpenMpi;
  // Intel MPI and MVAPICH descend from MPICH and share its PMI launchers.
  if (has("MPICH") || has("Intel(R) MPI") || has("MVAPICH")) return MpiFamily::Mpich;
  return MpiFamily::Other;
}

const char* mpiFamilyName(MpiFamily family) {
  switch (family) {
    case MpiFamily::None: return "no MPI";
    case MpiFamily::OpenMpi: return "Open MPI";
    case MpiFamily::Mpich: return "MPICH";
    case MpiFamily::Other: return "an MPI coil_perf cannot start";
  }
  return "?";
}

}  // namespace coil_perf
