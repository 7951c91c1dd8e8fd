// Which ranks share a host (and so can use shared memory).
#pragma once

#include <cstdint>

namespace coil {

/// Same value <=> same host: hashes the kernel boot id, the host name and the
/// network namespace. The namespace is included on purpose: ranks in
/// different network namespaces are treated as different hosts (that is how
/// coil's multi-host tests run on one machine, and how containers behave).
/// COIL_HOSTID, where set, replaces the host name and the namespace.
uint64_t localHostHash();

}  // namespace coil
