// COIL_BIND: where coil's own threads run (issue #15, "CPU binding").
//
//   COIL_BIND=none (default)  coil's threads keep the affinity they inherit
//   COIL_BIND=auto            each of coil's threads (tcp's proxy, ib's
//                             progress thread, the device proxy) is bound,
//                             as it starts, to the CPUs of the rank's NUMA
//                             node that the rank may use
//
// "The rank's CPUs" are the affinity mask of the rank thread that starts
// the coil thread, which the new thread inherits: the process's mask
// (taskset, numactl, the launcher's binding) unless the application
// narrowed that thread. The binding is never outside that mask, and only
// coil's own threads are bound (pthread_setaffinity_np on the new thread's
// handle, by the thread that started it, so it holds when that call
// returns): the application's threads are never moved.
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "topo/topology.h"

namespace coil::topo {

enum class BindMode { kNone, kAuto };

/// COIL_BIND's value; throws coilInvalidUsage naming the variable and the
/// words it takes when it is something else.
BindMode bindMode();

/// Where a coil thread of a rank on `rankCpus` should run: the CPUs of the
/// rank's home NUMA node (homeNode()) that are in `rankCpus`. Empty when
/// the topology knows no node of those CPUs; `why` then says so, else it
/// names the node.
std::vector<unsigned> bindingFor(const Topology& topology, const std::vector<unsigned>& rankCpus,
                                 std::string* why);

/// Called by the thread that has just started one of coil's threads, with
/// the mask that thread inherited: with COIL_BIND=auto, binds `thread` as
/// bindingFor() says and logs one INFO line (INIT) naming `what` and the
/// CPUs; with none, does nothing. Never throws: a binding that cannot be
/// made is a warning, and the thread runs unbound.
void bindOwnThread(std::thread& thread, const char* what) noexcept;

}  // namespace coil::topo
