// TCP congestion control on coil's data sockets (COIL_TCP_CONGESTION).
//
// Why coil lets the user choose it. On a machine whose default is BBR, a
// loopback connection is paced: the kernel sends part of each large write
// later, from a timer on whichever CPU it fires. With two ranks sending
// both ways on 2 CPUs the segments of one stream then leave from both CPUs
// and arrive out of order; TCP takes that for loss, retransmits and shrinks
// its window, and the connection stays in that state. Measured on a 2-vCPU
// VM with BBR (docs/performance.md, section 4.3): hundreds of retransmitted
// segments per second on loopback, point-to-point at 2.5-2.8 GB/s where
// the same run under reno or cubic moved 4.4-5.9 GB/s with none. Across a
// real network the congestion control is the site's policy, so coil leaves
// the system's default alone unless told otherwise.
#pragma once

#include <string>

namespace coil::transport::tcp {

/// The kernel's default congestion control
/// (/proc/sys/net/ipv4/tcp_congestion_control); "" when unreadable.
std::string systemCongestionControl();

/// Throws coilInvalidUsage naming COIL_TCP_CONGESTION unless `name` can be
/// set on a TCP socket of this process (tried on a scratch socket): the
/// message lists what the kernel has and what it allows without
/// CAP_NET_ADMIN.
void checkCongestionControl(const std::string& name);

/// Sets `name` on the TCP socket `fd` (checked before with
/// checkCongestionControl); throws coilInvalidUsage when the kernel refuses.
void setCongestionControl(int fd, const std::string& name);

/// The congestion control of the TCP socket `fd`; "" when unknown.
std::string congestionControlOf(int fd);

}  // namespace coil::transport::tcp
