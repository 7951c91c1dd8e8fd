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
#include "device_memory.h"
#include "json.h"
#include "launch.h"
#include "options.h"
#include "rank_buffers.h"
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

// The header's note on tcp's congestion control (COIL_TCP_CONGESTION, else
// the kernel's default): on loopback a pacing one (BBR) moved Open MPI's
// large messages at about half the speed of reno or cubic (and coil's,
// before its express sockets got a loopback-sized send buffer), so a
// reader of the numbers needs to know which ran.
std::string tcpCongestionNote() {
  if (const char* set = std::getenv("COIL_TCP_CONGESTION"); set && *set)
    return std::string("tcp congestion control: ") + set + " (COIL_TCP_CONGESTION)";
  std::FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
  char name[64] = {};
  const bool read = f != nullptr && std::fgets(name, sizeof name, f) != nullptr;
  if (f != nullptr) std::fclose(f);
  std::string system = read ? name : "unknown";
  if (!system.empty() && system.back() == '\n') system.pop_back();
  return "tcp congestion control: " + system + " (the system's default; COIL_TCP_CONGESTION sets coil's)";
}

// Where the sweep's buffers are (--memory), decided in main before any rank
// exists: the probe asks CUDA in a child process, since a process that has
// initialised CUDA cannot fork ranks that use it.
struct MemoryChoice {
  bool device = false;
  std::string note;  ///< the header's "memory: ..." line, without "memory: "
};

MemoryChoice chooseMemory(const Options& opts) {
  MemoryChoice c;
  if (opts.memory == Memory::Host) {
    c.note = "host";
    return c;
  }
  // The default is nccl-tests': device buffers when coil was built with
  // CUDA and a device answers, else host, and the header says why.
  if (opts.memory == Memory::Default && opts.baselineMpi) {
    c.note = "host (the MPI baseline uses host buffers)";
    return c;
  }
  if (opts.memory == Memory::Default && (opts.predict || !opts.calibratePath.empty())) {
    c.note = "host (--calibrate and --predict measure host buffers)";
    return c;
  }
  int count = 0;
  const std::string why = gpu::whyUnusableInChild(&count);
  if (why.empty()) {
    c.device = true;
    c.note = "device";  // main's rank 0 adds its device
    return c;
  }
  if (opts.memory == Memory::Device) {
    throw UsageError("--memory device: " +
                     (gpu::builtWithCuda() ? "no usable CUDA device (" + why + ")" : why));
  }
  c.note = "host (" + (gpu::builtWithCuda() ? "no usable CUDA device: " + why : why) + ")";
  return c;
}

std::string describeRank(const Participant& self, int threads, int device) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string who = "pid " + std::to_string(getpid());
  if (threads > 1) who += " thread " + std::to_string(self.thread());
  who += std::string(" on ") + host;
  if (device >= 0) who += " device " + std::to_string(device);
  return who;
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

// With device buffers: makes device (announced rank) % count current on
// this thread, before the communicator exists (coil's is the device current
// when it is created). Returns the device; -1 with host buffers.
int chooseDevice(const MemoryChoice& memory, const Participant& self) {
  if (!memory.device) return -1;
  const int count = gpu::deviceCount();  // initialises CUDA here: after any fork
  const int device = self.rank() % count;
  gpu::setDevice(device);
  return device;
}

// The whole run of one rank: connect, sweep (or calibrate), disconnect.
RankOutcome runRank(const Options& opts, const ProcessLaunch& launch, int thread, RunInfo info,
                    const MemoryChoice& memory) {
  RankOutcome out;
  Participant self(launch, thread);
  // Outlives the communicator: its device work has ended or failed once
  // the communicator is destroyed, and only then are the buffers freed.
  std::unique_ptr<RankBuffers> buffers;
  try {
    const int device = chooseDevice(memory, self);
    self.connect();
    out.printer = self.rank() == 0;
    if (device >= 0) {
      int commDevice = -1;
      coilCheck(coilCommCuDevice(self.comm(), &commDevice), "coilCommCuDevice", self.comm());
      if (commDevice != device) {
        throw std::runtime_error("coil's communicator is on CUDA device " +
                                 std::to_string(commDevice) + ", not on device " +
                                 std::to_string(device) + " that coil_perf made current");
      }
    }
    info.nranks = self.nranks();
    info.memory = memory.device ? "device" : "host";
    info.ranks = gatherText(self.comm(), self.rank(), self.nranks(),
                            describeRank(self, launch.threads(), device));
    Table table(stdout, info);
    if (out.printer) {
      table.printRunInfo();
      table.printNote("memory: " + memory.note +
                      (device >= 0 ? " (CUDA device " + std::to_string(device) + ")" : ""));
      // Which MPI the mpi columns measure: reports compare against a library.
      if (opts.baselineMpi) table.printNote("baseline mpi: " + mpiLibraryVersion());
      if (transportLabel(opts) == "tcp") table.printNote(tcpCongestionNote());
    }
    if (!opts.calibratePath.empty() || opts.predict) {
      runModelTools(opts, self, info.ranks, out.printer);
    } else {
      buffers = std::make_unique<RankBuffers>(memory.device, opts.maxBytes);
      Sweep sweep(opts, self, out.printer ? &table : nullptr, *buffers);
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
  buffers.reset();
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
    std::fprintf(stderr, "coil_perf: -G %d ignored: coil_perf does not capture CUDA graphs; "
                         "timing plain calls\n", opts.cudaGraphLaunches);
  }
  MemoryChoice memory;
  try {
    memory = chooseMemory(opts);  // before any fork
  } catch (const UsageError& e) {
    std::fprintf(stderr, "coil_perf: %s\n", e.what());
    return 2;
  }
  if (!memory.device && opts.windowBuffers) {
    std::fprintf(stderr, "coil_perf: -R 2 registers device buffers as windows; add --memory "
                         "device (a build with CUDA, on a machine with a GPU)\n");
    return 2;
  }
  if (memory.device && opts.registerBuffers) {
    std::fprintf(stderr, "coil_perf: -R 1 ignored: coil stages device buffers through its own "
                         "host memory, which is what its transports see\n");
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
      outcomes[0] = runRank(opts, *launch, 0, info, memory);  // MPI wants its own thread
    } else {
      std::vector<std::thread> threads;
      for (int t = 0; t < launch->threads(); ++t) {
        threads.emplace_back([&, t] { outcomes[t] = runRank(opts, *launch, t, info, memory); });
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
