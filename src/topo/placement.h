// Memory placement (issue #15): the pages of a shared-memory segment go to
// the NUMA node of the rank that creates it.
//
// Linux already places a page on the node of the CPU that first touches it,
// but for a shared segment that is whoever touches a page first, which is
// often a peer (the sender filling a receiver's FIFO, a reader of a window
// slot not yet written). An explicit MPOL_PREFERRED policy on the range
// (mbind(2), through syscall(): no libnuma dependency) makes the creator's
// node win whoever touches first, and still falls back to another node
// rather than fail when that node is full (MPOL_BIND would SIGBUS).
//
// "The creating rank" (transports/shm/shm_segment.cc): a shared window's
// segment is its creator's, which writes its slots; a FIFO segment is its
// receiver's, which polls its control lines and reads its slots: either way
// the rank that touches the segment most. With one NUMA node nothing is
// done at all.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "topo/topology.h"

namespace coil::topo {

/// The node to place a segment created by a rank on `cpus` on: its home
/// node (homeNode()), or, when that node has no memory, the nearest that
/// has (nearestNodeWithMemory(); mbind(2) would refuse a memoryless node
/// with EINVAL). nullopt with fewer than two NUMA nodes: then there is no
/// choice to make, and no system call is spent on it.
std::optional<unsigned> placementNode(const Topology& topology, const std::vector<unsigned>& cpus);

/// mbind(addr, bytes, MPOL_PREFERRED, {node}): pages of the range not yet
/// allocated will be on `node` when it has memory. `addr` page aligned.
/// 0 or the errno value.
int preferNode(void* addr, size_t bytes, unsigned node) noexcept;

/// For a segment just mapped, before its pages are allocated: places them
/// on the calling thread's node when the machine has several (one INFO line
/// on SHM saying where; a failure is a warning, not an error: placement is
/// an optimisation). `what` names the segment in the lines.
void placeOnCallersNode(void* addr, size_t bytes, const char* what) noexcept;

}  // namespace coil::topo
