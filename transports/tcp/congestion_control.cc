#include "transports/tcp/congestion_control.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace coil::transport::tcp {

namespace {

// One line of /proc/sys/net/ipv4/, without its newline; "" when unreadable.
std::string readSysctl(const char* name) {
  std::ifstream in(std::string("/proc/sys/net/ipv4/") + name);
  std::string line;
  std::getline(in, line);
  return line;
}

// setsockopt(TCP_CONGESTION); 0 or errno.
int trySet(int fd, const std::string& name) {
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0)
    return 0;
  return errno;
}

[[noreturn]] void refused(const std::string& name, int err) {
  const std::string available = readSysctl("tcp_available_congestion_control");
  const std::string allowed = readSysctl("tcp_allowed_congestion_control");
  fail(coilInvalidUsage, "COIL_TCP_CONGESTION=", name, ": the kernel refused it (",
       std::strerror(err), "); this kernel has: ", available.empty() ? "(unknown)" : available,
       "; allowed without CAP_NET_ADMIN: ", allowed.empty() ? "(unknown)" : allowed,
       err == ENOENT ? " (a module may load it: modprobe tcp_" + name + ")" : std::string());
}

}  // namespace

std::string systemCongestionControl() { return readSysctl("tcp_congestion_control"); }

void checkCongestionControl(const std::string& name) {
  // TCP_CA_NAME_MAX is 16 with the terminating NUL.
  if (name.empty() || name.size() > 15 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos)
    fail(coilInvalidUsage, "COIL_TCP_CONGESTION=", name,
         ": expected the name of a TCP congestion control such as reno or cubic (lower case, at "
         "most 15 characters)");
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    fail(coilSystemError, "COIL_TCP_CONGESTION=", name, ": cannot open a socket to try it: ",
         std::strerror(errno));
  const int err = trySet(fd, name);
  close(fd);
  if (err != 0) refused(name, err);
}

void setCongestionControl(int fd, const std::string& name) {
  if (const int err = trySet(fd, name); err != 0) refused(name, err);
}

std::string congestionControlOf(int fd) {
  char name[16] = {};
  socklen_t length = sizeof name;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return "";
  return std::string(name, strnlen(name, sizeof name));
}

}  // namespace coil::transport::tcp
