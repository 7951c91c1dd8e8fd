// The MPI half of coil_perf in builds without MPI: nothing to start.
#include <stdexcept>

#include "baseline.h"

namespace coil_perf {

bool mpiBuiltIn() { return false; }

std::string mpiLibraryVersion() { return ""; }

MpiFamily builtInMpiFamily() { return MpiFamily::None; }

std::unique_ptr<MpiWorld> startMpi(int*, char***) {
  throw std::logic_error("coil_perf was built without MPI");
}

}  // namespace coil_perf
