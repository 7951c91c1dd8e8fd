// coil_perf: bandwidth and correctness sweep of coil's collectives over its
// public API, in the shape of nccl-tests' *_perf programs (sweep.h), and the
// cost-model tools --calibrate and --predict (calibrate.h). See options.cc
// for the flags and launch.h for how ranks are started.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "calibrate.h"
#include "coil.h"
#include "coil_calls.h"
#include "json.h"
#include "launch.h"
#include "options.h"
#include "report.h"
#include "sweep.h"
#include "units.h"

using namespace coil_perf;

namespace {

std::string transportLabel(const Options& opts) {
  if (!opts.transport.empty()) return opts.transport;
  const char* env = std::getenv("COIL_TRANSPORT");
  return env && *env ? env : "auto";
}

std::string describeThisRank() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return "pid " + std::to_string(getpid()) + " on " + host;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  try {
    opts = parseOptions(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "coil_perf: %s (try -h)\n", e.what());
    return 2;
  }
  if (opts.help) {
    printUsage(stdout, argv[0]);
    return 0;
  }
  // Before any rank exists, so that forked ranks inherit it.
  if (!opts.transport.empty()) setenv("COIL_TRANSPORT", opts.transport.c_str(), 1);
  // Ranks forked on this host meet over loopback: no other interface is
  // needed, and none should be touched (COIL_SOCKET_IFNAME still wins).
  if (detectLauncher().launcher == Launcher::None) setenv("COIL_SOCKET_IFNAME", "lo", 0);

  std::unique_ptr<Participant> self;
  try {
    self = std::make_unique<Participant>(opts, &argc, &argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "coil_perf: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coil_perf: %s\n", e.what());
    return 1;
  }

  RunInfo info;
  info.tool = "coil_perf";
  info.transport = transportLabel(opts);
  info.launcher = launcherName(self->launcher());
  info.minBytes = opts.minBytes;
  info.maxBytes = opts.maxBytes;
  info.factor = opts.factor;
  info.stepBytes = opts.stepBytes;
  info.warmup = opts.warmup;
  info.iters = opts.iters;
  info.check = opts.check;
  info.baselineName = opts.baselineMpi ? "mpi" : "";
  for (const CollectiveInfo& c : opts.collectives) info.collectives.push_back(c.name);

  bool printer = false;  // rank 0, once connect() has said who that is
  RunSummary summary;
  std::vector<Row> rows;
  try {
    self->connect();
    printer = self->rank() == 0;
    info.nranks = self->nranks();
    info.ranks = gatherText(self->comm(), self->rank(), self->nranks(), describeThisRank());
    Table table(stdout, info);
    if (printer) table.printRunInfo();
    if (!opts.calibratePath.empty() || opts.predict) {
      runModelTools(opts, *self, info.ranks, printer);
    } else {
      Sweep sweep(opts, *self, printer ? &table : nullptr);
      try {
        sweep.run();
      } catch (...) {
        rows = sweep.rows();  // keep the finished rows for --json
        throw;
      }
      rows = sweep.rows();
      summary.wrongTotal = sweep.wrongTotal();
      summary.avgBusbw = averageBusbw(rows);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coil_perf: rank %d: %s\n", self->rank(), e.what());
    summary.ok = false;
    summary.error = e.what();
  }

  bool othersOk = true;
  try {
    othersOk = self->close(!summary.ok);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coil_perf: rank %d: %s\n", self->rank(), e.what());
    if (summary.ok) summary.error = e.what();
    summary.ok = false;
  }
  if (!othersOk) {
    if (summary.ok) {  // otherwise this rank's own failure was reported already
      std::fprintf(stderr, "coil_perf: another rank failed (see above)\n");
      summary.error = "another rank failed";
    }
    summary.ok = false;
  }
  if (summary.wrongTotal > 0) summary.ok = false;

  if (printer && !opts.jsonPath.empty()) {
    try {
      writeJson(opts.jsonPath, info, rows, summary);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "coil_perf: %s\n", e.what());
      summary.ok = false;
    }
  }
  return summary.ok ? 0 : 1;
}
