#include "options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "units.h"

namespace coil_perf {
namespace {

enum class Key {
  MinBytes, MaxBytes, StepFactor, StepBytes, Iters, AggIters, Warmup, RunCycles, ParallelInit,
  Check, Op, Datatype, Root, Blocking, Timeout, CudaGraph, Json, Average, Register, Threads, Gpus,
  Collective, Procs, Transport, Baseline, Memory, Calibrate, Predict, Model, Help, Version,
};

// One row per spelling: nccl-tests' long names first, coil_perf's older
// ones after them. shortName 0: long only.
struct Flag {
  Key key;
  char shortName;
  const char* longName;
  bool takesValue;
};

constexpr Flag kFlags[] = {
    {Key::MinBytes, 'b', "minbytes", true},
    {Key::MaxBytes, 'e', "maxbytes", true},
    {Key::StepFactor, 'f', "stepfactor", true},
    {Key::StepBytes, 'i', "stepbytes", true},
    {Key::Iters, 'n', "iters", true},
    {Key::AggIters, 'm', "agg_iters", true},
    {Key::Warmup, 'w', "warmup_iters", true},
    {Key::RunCycles, 'N', "run_cycles", true},
    {Key::ParallelInit, 'p', "parallel_init", true},
    {Key::Check, 'c', "check", true},
    {Key::Op, 'o', "op", true},
    {Key::Datatype, 'd', "datatype", true},
    {Key::Root, 'r', "root", true},
    {Key::Blocking, 'z', "blocking", true},
    {Key::Timeout, 'T', "timeout", true},
    {Key::CudaGraph, 'G', "cudagraph", true},
    {Key::Json, 'J', "output_file", true},
    {Key::Json, 0, "json", true},
    {Key::Average, 'a', "average", true},
    {Key::Register, 'R', "local_register", true},
    {Key::Register, 0, "register", true},
    {Key::Threads, 't', "nthreads", true},
    {Key::Gpus, 'g', "ngpus", true},
    {Key::Collective, 'C', "collective", true},
    {Key::Procs, 'P', "nprocs", true},
    {Key::Transport, 0, "transport", true},
    {Key::Baseline, 0, "baseline", true},
    {Key::Memory, 0, "memory", true},
    {Key::Calibrate, 0, "calibrate", true},
    {Key::Predict, 0, "predict", false},
    {Key::Model, 0, "model", true},
    {Key::Help, 'h', "help", false},
    {Key::Version, 0, "version", false},
};

// nccl-tests flags with no meaning for host buffers, and why: a script
// written for nccl-tests then fails saying so, not "unknown argument".
struct Missing {
  char shortName;
  const char* why;
};
constexpr Missing kNcclTestsOnly[] = {
    {'y', "stream_null: each rank uses its own stream"},
    {'S', "report_timestamps"},
    {'x', "cta_policy: there are no CTAs on the host"},
    {'D', "device_implementation: there is no device"},
    {'V', "device_cta_count: there is no device"},
    {'M', "memory_report: coil_perf does not report device memory use; --memory chooses "
          "host or device buffers"},
    {'u', "unalign"},
    {'I', "per_iter_timing"},
    {'K', "per_iter_skip"},
};

const Flag* findShort(char c) {
  for (const Flag& f : kFlags)
    if (f.shortName != 0 && f.shortName == c) return &f;
  return nullptr;
}
const Flag* findLong(const std::string& name) {
  for (const Flag& f : kFlags)
    if (name == f.longName) return &f;
  return nullptr;
}

int intIn(const std::string& v, const char* flag, long long lo, long long hi) {
  return static_cast<int>(parseInteger(v, flag, lo, hi));
}

void apply(Options& o, Key key, const std::string& v) {
  constexpr long long kMany = 1000000000;
  switch (key) {
    case Key::MinBytes: o.minBytes = parseBytes(v, "-b"); break;
    case Key::MaxBytes: o.maxBytes = parseBytes(v, "-e"); break;
    case Key::StepFactor: {
      char* end = nullptr;
      o.factor = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.factor > 1.0)) {
        throw UsageError("-f: '" + v + "' must be a number greater than 1");
      }
      break;
    }
    case Key::StepBytes: o.stepBytes = parseBytes(v, "-i"); break;
    case Key::Iters: o.iters = intIn(v, "-n", 1, kMany); break;
    case Key::AggIters: o.aggIters = intIn(v, "-m", 1, 1 << 20); break;
    case Key::Warmup: o.warmup = intIn(v, "-w", 0, kMany); break;
    case Key::RunCycles: o.runCycles = intIn(v, "-N", 0, kMany); break;
    // Ranks of a process always initialise in parallel (one thread each).
    case Key::ParallelInit: intIn(v, "-p", 0, 1); break;
    case Key::Check: o.checkIters = intIn(v, "-c", 0, 1 << 20); break;
    case Key::Op:
      o.ops = parseOps(v);
      o.allOpsAsked = v == "all";
      break;
    case Key::Datatype: o.types = parseTypes(v); break;
    case Key::Root:
      o.allRoots = v == "all";
      if (!o.allRoots) o.root = intIn(v, "-r", 0, 1023);
      break;
    case Key::Blocking: o.blocking = intIn(v, "-z", 0, 3); break;
    case Key::Timeout: o.timeoutSeconds = intIn(v, "-T", 0, 86400 * 365); break;
    case Key::CudaGraph: o.cudaGraphLaunches = intIn(v, "-G", 0, kMany); break;
    case Key::Json: o.jsonPath = v; break;
    case Key::Average: o.average = static_cast<Average>(intIn(v, "-a", 0, 3)); break;
    case Key::Register: {
      const int mode = intIn(v, "-R", 0, 2);
      o.registerBuffers = mode == 1;
      o.windowBuffers = mode == 2;
      break;
    }
    case Key::Threads: o.threads = intIn(v, "-t", 1, 1024); break;
    case Key::Gpus:
      if (intIn(v, "-g", 1, 1024) != 1)
        throw UsageError("-g " + v + ": coil runs one rank (one device) per thread; "
                         "use -t for more ranks per process");
      break;
    case Key::Collective: o.collectives = parseCollectives(v); break;
    case Key::Procs: o.nprocs = intIn(v, "-P", 1, 1024); break;
    case Key::Transport:
      // coil itself names the transports this build has when one is unknown.
      if (v.empty() || v.size() > 15 ||
          !std::all_of(v.begin(), v.end(), [](char ch) { return std::isalnum(ch) != 0; }))
        throw UsageError("--transport: '" + v + "' is not a transport name (shm, tcp, ib)");
      o.transport = v;
      break;
    case Key::Baseline:
      if (v != "mpi") throw UsageError("--baseline: '" + v + "' is not a baseline (only: mpi)");
      o.baselineMpi = true;
      break;
    case Key::Memory:
      if (v == "host") {
        o.memory = Memory::Host;
      } else if (v == "device") {
        o.memory = Memory::Device;
      } else {
        throw UsageError("--memory: '" + v + "' is not a memory kind (host, device)");
      }
      break;
    case Key::Calibrate:
      if (v.empty()) throw UsageError("--calibrate needs a file name");
      o.calibratePath = v;
      break;
    case Key::Predict: o.predict = true; break;
    case Key::Model: o.modelPath = v; break;
    case Key::Help: o.help = true; break;
    case Key::Version: o.version = true; break;
  }
}

[[noreturn]] void unknown(const std::string& arg) {
  if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
    for (const Missing& m : kNcclTestsOnly)
      if (m.shortName == arg[1])
        throw UsageError(std::string("-") + m.shortName + " is an nccl-tests flag coil_perf does "
                         "not have (" + m.why + ")");
  }
  throw UsageError("unknown argument '" + arg + "'");
}

}  // namespace

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const Flag* flag = nullptr;
    std::string value;
    bool haveValue = false;
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {  // --name, --name=value
      const size_t eq = arg.find('=');
      flag = findLong(arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2));
      if (flag && eq != std::string::npos) {
        value = arg.substr(eq + 1);
        haveValue = true;
      }
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {  // -b 8, -b8
      flag = findShort(arg[1]);
      if (flag && arg.size() > 2) {
        value = arg.substr(2);
        haveValue = true;
      }
    }
    if (flag == nullptr) unknown(arg);
    if (flag->takesValue && !haveValue) {
      if (i + 1 >= argc) throw UsageError("'" + arg + "' needs a value");
      value = argv[++i];
    } else if (!flag->takesValue && haveValue) {
      throw UsageError("'" + arg + "' takes no value");
    }
    apply(o, flag->key, value);
  }
  if (o.types.empty()) o.types = parseTypes("float");
  if (o.ops.empty()) o.ops = parseOps("sum");
  if (o.collectives.empty()) o.collectives = parseCollectives("allreduce");
  if (!o.allOpsAsked) {
    // An operator named on its own must run on some type of -d (a sweep
    // skips the pairs coil refuses, such as bxor on float).
    for (const OpInfo& op : o.ops) {
      bool runs = false;
      for (const TypeInfo& type : o.types) runs = runs || opTakesType(op, type);
      if (!runs)
        throw UsageError(std::string("-o ") + op.name +
                         " takes integer types only, and -d names none (int8 uint8 int32 uint32 "
                         "int64 uint64, or all)");
    }
  }
  if (o.predict && o.modelPath.empty() && o.calibratePath.empty()) {
    throw UsageError("--predict needs the model's parameters: --model FILE, or --calibrate FILE");
  }
  if (!o.modelPath.empty() && !o.predict) throw UsageError("--model is only used by --predict");
  if (o.threads > 1 && (o.predict || !o.calibratePath.empty())) {
    // They force each algorithm through COIL_ALGO, which the threads of a
    // process would share while they create their communicators.
    throw UsageError("--calibrate and --predict: one rank per process; use -P instead of -t");
  }
  if (o.baselineMpi && o.threads > 1) {
    throw UsageError("--baseline mpi: one rank per MPI process; leave -t out");
  }
  if (o.memory == Memory::Device && o.baselineMpi) {
    throw UsageError("--memory device: the MPI baseline uses host buffers; run it with "
                     "--memory host");
  }
  if (o.memory == Memory::Device && (o.predict || !o.calibratePath.empty())) {
    throw UsageError("--memory device: --calibrate and --predict measure host buffers; "
                     "leave --memory device out");
  }
  if (!o.help && !o.version) sweepSizes(o.minBytes, o.maxBytes, o.factor, o.stepBytes);  // validates -b/-e/-f/-i
  return o;
}

std::vector<std::string> flagSpellings() {
  std::vector<std::string> out;
  for (const Flag& f : kFlags) {
    if (f.shortName != 0) out.push_back(std::string("-") + f.shortName);
    out.push_back(std::string("--") + f.longName);
  }
  return out;
}

void printUsage(std::FILE* out, const char* program) {
  std::fprintf(out,
      "usage: %s [flags]          bandwidth sweep of coil's collectives (nccl-tests style)\n"
      "Sweep (as nccl-tests):\n"
      "  -b, --minbytes SIZE      smallest size (default 8); K/M/G suffixes\n"
      "  -e, --maxbytes SIZE      largest size (default 64M)\n"
      "  -f, --stepfactor X       multiply the size by X each step (default 2)\n"
      "  -i, --stepbytes SIZE     add SIZE each step instead of -f\n"
      "  -n, --iters N            timed iterations per size (default 20)\n"
      "  -m, --agg_iters N        calls per timed iteration, in one coilGroupStart/End\n"
      "                           (default 1); the time is per call\n"
      "  -w, --warmup_iters N     untimed iterations before them (default 5)\n"
      "  -N, --run_cycles N       run the whole sweep N times, printing each (default 1;\n"
      "                           0 = until stopped)\n"
      "  -c, --check N            checked calls per row, bit-exact; 0 = no check (default 1)\n"
      "  -d, --datatype T         float half bfloat16 double int8 uint8 int32 uint32\n"
      "                           int64 uint64, or all (default float)\n"
      "  -o, --op OP              sum prod max min avg band bor bxor, or all (default\n"
      "                           sum); only for allreduce, reduce and reducescatter\n"
      "                           (others print none); band, bor, bxor: integer types\n"
      "                           only (the sweep skips them for float types)\n"
      "  -r, --root R|all         root of broadcast, reduce, gather, scatter (default 0);\n"
      "                           all: every rank in turn\n"
      "  -a, --average 0|1|2|3    the time a row reports: rank 0's, the mean, the min or\n"
      "                           the max over ranks (default 1)\n"
      "  -z, --blocking 0|1|2|3   calls on host buffers return complete, so 0 and 2 are the\n"
      "                           same; 1 and 3 add a barrier after each timed iteration\n"
      "                           (after its -m group: a barrier cannot join a group); on\n"
      "                           device buffers 1, 2, 3 first wait for the stream (default 0)\n"
      "  -T, --timeout SECONDS    fail a wait that lasts longer (sets COIL_TIMEOUT_MS;\n"
      "                           default 0: coil's own, 30 minutes)\n"
      "  -J, --output_file FILE   also write every row as JSON (--json FILE is the same)\n"
      "  -R, --local_register 0|1|2  1: coilCommRegister the buffers first (default 0;\n"
      "                           --register is the same): large sends and receives over ib go\n"
      "                           zero-copy (host buffers; ignored with --memory device).\n"
      "                           2: coilCommWindowRegister them (--memory device): all-reduce,\n"
      "                           all-gather, reduce-scatter, broadcast, reduce and all-to-all\n"
      "                           read the peers' buffers in place (ranks on one host's GPUs)\n"
      "      --memory host|device where the buffers are (default: device when coil_perf\n"
      "                           was built with CUDA and a device answers, else host; the\n"
      "                           header says which and why). device: coilMemAlloc'd on\n"
      "                           device rank %% count, calls on one stream per rank, timed\n"
      "                           until the stream has run. --baseline, --calibrate and\n"
      "                           --predict default to host\n"
      "Ranks:\n"
      "  -t, --nthreads N         ranks as threads of each process (default 1)\n"
      "  -P, --nprocs N           processes to fork on this host when no launcher started\n"
      "                           coil_perf (default 2, or 1 with -t); ranks = N x -t.\n"
      "                           Older coil_perf spelled it -N, now nccl-tests' cycles\n"
      "  -g, --ngpus 1            accepted for nccl-tests' scripts: one rank per thread\n"
      "  -p, --parallel_init 0|1  accepted: the threads of a process always initialise in\n"
      "                           parallel\n"
      "  -G, --cudagraph N        accepted and ignored: coil_perf does not capture CUDA graphs\n"
      "                           (a note on stderr when N > 0)\n"
      "coil_perf's own:\n"
      "  -C, --collective C       allreduce broadcast reduce allgather reducescatter alltoall\n"
      "                           gather scatter sendrecv, a comma list, or all (default\n"
      "                           allreduce; all runs them one after another). Not\n"
      "                           nccl-tests' -C (report_cputime): it has one program each\n"
      "      --transport NAME     force coil's transport: shm, tcp, ib (sets COIL_TRANSPORT)\n"
      "      --baseline mpi       also time MPI's counterpart of each collective (needs\n"
      "                           mpirun and an MPI build)\n"
      "      --calibrate FILE     measure alpha, beta, gamma of the transport in use and\n"
      "                           write them to FILE (the COIL_TUNE_FILE format); no sweep\n"
      "      --predict            all-reduce ring and tree: the cost model's time next to\n"
      "                           the measured one, for every size of -b/-e/-f\n"
      "      --model FILE         parameters for --predict (default: --calibrate's fit)\n"
      "      --version            coil_perf's and libcoil's versions\n"
      "  -h, --help               this text\n"
      "nccl-tests flags for GPUs only (-y -S -x -D -V -M -u -I -K) are refused by name.\n"
      "Sizes (nccl-tests' convention): SIZE is the bytes of the whole operation. For\n"
      "allgather, reducescatter, alltoall, gather and scatter it is n blocks of count/n\n"
      "elements (rounded down to whole blocks); busbw = algbw * 2(n-1)/n for allreduce,\n"
      "(n-1)/n for allgather, reducescatter, alltoall, gather, scatter, and 1 for\n"
      "broadcast, reduce and sendrecv (ring: send to rank+1, receive from rank-1).\n"
      "In-place columns: allreduce, broadcast, reduce, allgather, reducescatter; n/a\n"
      "for the others.\n"
      "Launch: without a launcher, coil_perf forks -P processes itself, each running -t\n"
      "ranks. Under mpirun it shares coil's id with MPI_Bcast (MPI builds) or uses\n"
      "MASTER_ADDR/MASTER_PORT; under torchrun it uses RANK/WORLD_SIZE with\n"
      "MASTER_ADDR/MASTER_PORT, under srun SLURM_PROCID/SLURM_NTASKS (MASTER_ADDR and\n"
      "MASTER_PORT optional: the step's first node). In an sbatch script or salloc\n"
      "shell, not under srun, it forks. Exit status: 0 ok,\n"
      "1 wrong results or a coil error, 2 bad usage.\n",
      program);
}

}  // namespace coil_perf
