// TCP congestion control on coil's data sockets (COIL_TCP_CONGESTION).
//
// Why coil lets the user choose it. On a machine whose default is BBR, a
// loopback connection is paced. Measured on a 2-vCPU VM with BBR
// (docs/performance.md, section 4.3): two ranks sending both ways
// retransmitted hundreds of segments per run on loopback, with segments
// arriving out of order, and point-to-point moved 2.5-2.7 GB/s where coil's
// sockets under reno moved 4.6-5.2 in the same runs (and a kernel default
// of reno or cubic, tried for the experiment, nearly no retransmissions).
// Our reading: a paced write partly leaves later from a timer, on whichever
// CPU it fires, so one stream leaves from both CPUs; TCP takes the
// reordering for loss and shrinks its window. On loopback coil now keeps
// the express socket's send buffer small enough that this no longer
// happens (tcp_express.h, kLocalExpressSendBufferBytes); the choice stays
// for what else a congestion control decides. Across a real network it is
// the site's policy, so coil leaves the system's default alone unless told
// otherwise.
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
