// Names for coil's own threads, as `top -H`, `ps -L`, gdb and py-spy show
// them: "coil-tcp-r3" is rank 3's tcp proxy. A trainer's process holds
// dozens of threads (torch's, OpenMP's, the launcher's); without a name
// coil's look like the application's, and a user asking which thread spins
// or where COIL_BIND put it has to guess.
#pragma once

#include <string>
#include <thread>

namespace coil {

/// "coil-<role>-r<rank>" ("coil-<role>" when rank < 0), cut to the 15
/// characters the kernel keeps.
std::string ownThreadName(const char* role, int rank);

/// Gives `thread`, just started, ownThreadName(role, rank). The thread that
/// started it calls this, so the name is there when that call returns (a
/// thread naming itself might not have run yet when someone looks). Best
/// effort: a name is a label, and failing to set one is not an error.
void nameOwnThread(std::thread& thread, const char* role, int rank) noexcept;

}  // namespace coil
