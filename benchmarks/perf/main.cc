// coil_perf: bandwidth and correctness sweep of coil's collectives over its
// public API, in the shape of nccl-tests' *_perf programs (sweep.h), and the
// cost-model tools --calibrate and --predict (calibrate.h). See options.cc
// for the flags and launch.h for how processes and ranks are started.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

std::string describeRank(const Participant& self, int threads) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string who = "pid " + std::to_string(getpid());
  if (threads > 1) who += " thread " + std::to_string(self.thread());
  return who + " on " + host;
}

std::string versionText(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

void printVersion() {
  int library = 0;
  coilGetVersion(&library);
  std::printf("coil_perf %s (built with coil.h %s; libcoil %s)\n",
              versionText(COIL_VERSION_CODE).c_str(), versionText(COIL_VERSION_CODE).c_str(),
              versionText(library).c_str());
}

// What one rank ends with.
struct RankOutcome {
  bool ok = true;
  std::string error;
  bool printer = false;  // rank 0, which prints the table and writes --json
  std::vector<Row> rows;
  long long wrongTotal = -1;  // -1: not checked
  double avgBusbw = 0;
  RunInfo info;
};

void fail(RankOutcome& out, int rank, const std::string& what) {
  std::fprintf(stderr, "coil_perf: rank %d: %s\n", rank, what.c_str());
  if (out.ok) out.error = what;
  out.ok = false;
}

// The whole run of one rank: connect, sweep (or calibrate), disconnect.
RankOutcome runRank(const Options& opts, const ProcessLaunch& launch, int thread, RunInfo info) {
  RankOutcome out;
  Participant self(launch, thread);
  try {
    self.connect();
    out.printer = self.rank() == 0;
    info.nranks = self.nranks();
    info.ranks = gatherText(self.comm(), self.rank(), self.nranks(),
                            describeRank(self, launch.threads()));
    Table table(stdout, info);
    if (out.printer) table.printRunInfo();
    if (!opts.calibratePath.empty() || opts.predict) {
      runModelTools(opts, self, info.ranks, out.printer);
    } else {
      Sweep sweep(opts, self, out.printer ? &table : nullptr);
      try {
        sweep.run();
      } catch (...) {
        out.rows = sweep.rows();  // keep the finished rows for --json
        throw;
      }
      out.rows = sweep.rows();
      out.wrongTotal = sweep.wrongTotal();
      out.avgBusbw = averageBusbw(out.rows);
    }
  } catch (const std::exception& e) {
    fail(out, self.rank(), e.what());
  }
  try {
    self.close();
  } catch (const std::exception& e) {
    fail(out, self.rank(), e.what());
  }
  out.info = std::move(info);
  return out;
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
  if (opts.version) {
    printVersion();
    return 0;
  }
  if (opts.cudaGraphLaunches > 0) {
    std::fprintf(stderr, "coil_perf: -G %d ignored: coil works on host buffers, which have no "
                         "CUDA graphs; timing plain calls\n", opts.cudaGraphLaunches);
  }
  // Before any rank exists, so that forked ranks inherit them.
  if (!opts.transport.empty()) setenv("COIL_TRANSPORT", opts.transport.c_str(), 1);
  if (opts.timeoutSeconds > 0) {
    setenv("COIL_TIMEOUT_MS", std::to_string(opts.timeoutSeconds * 1000LL).c_str(), 1);
  }
  // Ranks forked on this host meet over loopback: no other interface is
  // needed, and none should be touched (COIL_SOCKET_IFNAME still wins).
  if (detectLauncher().launcher == Launcher::None) setenv("COIL_SOCKET_IFNAME", "lo", 0);

  std::unique_ptr<ProcessLaunch> launch;
  try {
    launch = std::make_unique<ProcessLaunch>(opts, &argc, &argv);
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
  info.launcher = launcherName(launch->launcher());
  info.minBytes = opts.minBytes;
  info.maxBytes = opts.maxBytes;
  info.factor = opts.factor;
  info.stepBytes = opts.stepBytes;
  info.warmup = opts.warmup;
  info.iters = opts.iters;
  info.check = opts.check();
  info.baselineName = opts.baselineMpi ? "mpi" : "";
  for (const CollectiveInfo& c : opts.collectives) info.collectives.push_back(c.name);

  std::vector<RankOutcome> outcomes(static_cast<size_t>(launch->threads()));
  try {
    launch->shareId();
    if (launch->threads() == 1) {
      outcomes[0] = runRank(opts, *launch, 0, info);  // MPI wants its own thread
    } else {
      std::vector<std::thread> threads;
      for (int t = 0; t < launch->threads(); ++t) {
        threads.emplace_back([&, t] { outcomes[t] = runRank(opts, *launch, t, info); });
      }
      for (std::thread& t : threads) t.join();
    }
  } catch (const std::exception& e) {
    fail(outcomes[0], launch->process() * launch->threads(), e.what());
  }

  bool ok = true;
  for (const RankOutcome& o : outcomes) ok = ok && o.ok && o.wrongTotal <= 0;
  const bool othersFailed = !launch->waitForOthers(!ok);
  if (othersFailed && ok) std::fprintf(stderr, "coil_perf: another rank failed (see above)\n");
  ok = ok && !othersFailed;
  const RankOutcome& first = outcomes[0];  // thread 0: rank 0 in rank 0's process
  if (first.printer && !opts.jsonPath.empty()) {
    RunSummary summary;
    summary.ok = ok;
    summary.error = !first.error.empty() ? first.error : othersFailed ? "another rank failed" : "";
    summary.wrongTotal = first.wrongTotal;
    summary.avgBusbw = first.avgBusbw;
    try {
      writeJson(opts.jsonPath, first.info, first.rows, summary);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "coil_perf: %s\n", e.what());
      ok = false;
    }
  }
  return ok ? 0 : 1;
}
