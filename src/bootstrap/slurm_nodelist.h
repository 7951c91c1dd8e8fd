// Slurm's compressed host lists ("node[01-04,07],gpu5"), as it writes
// SLURM_STEP_NODELIST and SLURM_JOB_NODELIST. coil needs only the first host:
// under srun, task 0 runs there, and hosts the rendezvous root when
// MASTER_ADDR is not given (launcher_env.h).
#pragma once

#include <string>
#include <string_view>

namespace coil {

/// The first host a Slurm host list names, with its zero padding kept
/// ("node[01-04],x" -> "node01"; "rack[2-3]n[10-11]" -> "rack2n10"). Throws
/// coilInvalidUsage saying what is malformed: an empty list or host name,
/// unbalanced brackets, a range that is not numbers or runs backwards.
std::string firstSlurmHost(std::string_view list);

}  // namespace coil
