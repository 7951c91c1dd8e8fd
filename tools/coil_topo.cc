// coil-topo: what this machine is made of, as coil sees it.
//
//   coil-topo                 this machine (hwloc, and /sys for RDMA ports)
//   coil-topo --json          the same as one JSON object
//   coil-topo --xml FILE      a topology saved by `lstopo --of xml` (another machine, a test)
//   coil-topo --sysfs ROOT    read RDMA ports under ROOT/class/infiniband (default /sys)
//   coil-topo --comm          under a launcher: the transport between every pair of
//                             ranks, and why (topo/comm_report.h)
//
// Prints the CPUs and NUMA nodes, the GPUs and NICs against each other in
// the manner of `nvidia-smi topo -m`, and each RDMA port's state, link
// layer, MTU and GID table — and says plainly what it did not find.
// libcoil learns the same at its first init (docs/topology.md).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "topo/comm_report.h"
#include "topo/ib_ports.h"
#include "topo/report.h"
#include "topo/topology.h"

namespace {

void usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: coil-topo [--json] [--xml FILE] [--sysfs ROOT] | --comm\n"
      "Prints this machine's topology: packages, NUMA nodes, cores, PUs, L3; GPUs and NICs\n"
      "against each other (as nvidia-smi topo -m); RDMA ports with their GIDs.\n"
      "  --json        print it as one JSON object\n"
      "  --xml FILE    load the topology from an hwloc XML file (lstopo --of xml) instead;\n"
      "                RDMA ports are then not read unless --sysfs is given\n"
      "  --sysfs ROOT  read RDMA ports under ROOT/class/infiniband (default /sys)\n"
      "  --comm        run under a launcher (torchrun, mpirun, srun): join a communicator and\n"
      "                print, on rank 0, the transport between every pair of ranks and why\n"
      "  -h, --help    this text\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  std::string xml, sysfs;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const bool takesValue = !std::strcmp(arg, "--xml") || !std::strcmp(arg, "--sysfs");
    if (takesValue && i + 1 >= argc) {
      std::fprintf(stderr, "coil-topo: %s needs a value\n", arg);
      usage(stderr);
      return 2;
    }
    if (!std::strcmp(arg, "--comm"))
      return coil::topo::printCommReport();
    if (!std::strcmp(arg, "--json"))
      json = true;
    else if (!std::strcmp(arg, "--xml"))
      xml = argv[++i];
    else if (!std::strcmp(arg, "--sysfs"))
      sysfs = argv[++i];
    else if (!std::strcmp(arg, "-h") || !std::strcmp(arg, "--help")) {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "coil-topo: unknown argument '%s'\n", arg);
      usage(stderr);
      return 2;
    }
  }
  try {
    coil::topo::Report report;
    report.topology = xml.empty() ? coil::topo::discover() : coil::topo::fromXml(xml);
    // The RDMA ports of this machine say nothing about the machine an XML
    // file describes: read them only when asked.
    if (xml.empty() || !sysfs.empty())
      report.rdma = coil::topo::readIbDevices(sysfs.empty() ? "/sys" : sysfs);
    else
      report.rdmaNotReadWhy =
          "the topology comes from " + xml +
          ", which this machine's /sys does not describe; --sysfs ROOT reads a tree";
    const std::string text = json ? jsonReport(report) : textReport(report);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coil-topo: %s\n", e.what());
    return 1;
  }
}
