#include "options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "units.h"

namespace coil_perf {
namespace {

// One row per flag. `key` names the flag inside this file; long-only
// flags have no short spelling.
struct Flag {
  char key;
  bool hasShort;
  const char* longName;
  bool takesValue;
};

constexpr Flag kFlags[] = {
    {'b', true, "minbytes", true},   {'e', true, "maxbytes", true},
    {'f', true, "stepfactor", true}, {'i', true, "stepbytes", true},
    {'n', true, "iters", true},      {'w', true, "warmup_iters", true},
    {'c', true, "check", true},      {'d', true, "datatype", true},
    {'o', true, "op", true},         {'N', true, "nranks", true},
    {'T', false, "transport", true}, {'R', true, "register", true}, {'J', false, "json", true},
    {'B', false, "baseline", true},  {'C', true, "collective", true},
    {'r', true, "root", true},       {'K', false, "calibrate", true},
    {'P', false, "predict", false},  {'M', false, "model", true},
    {'h', true, "help", false},
};

const Flag* findShort(char c) {
  for (const Flag& f : kFlags) {
    if (f.hasShort && f.key == c) return &f;
  }
  return nullptr;
}
const Flag* findLong(const std::string& name) {
  for (const Flag& f : kFlags) {
    if (name == f.longName) return &f;
  }
  return nullptr;
}

void apply(Options& o, char flag, const std::string& v) {
  switch (flag) {
    case 'b': o.minBytes = parseBytes(v, "-b"); break;
    case 'e': o.maxBytes = parseBytes(v, "-e"); break;
    case 'f': {
      char* end = nullptr;
      o.factor = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.factor > 1.0)) {
        throw UsageError("-f: '" + v + "' must be a number greater than 1");
      }
      break;
    }
    case 'i': o.stepBytes = parseBytes(v, "-i"); break;
    case 'n': o.iters = static_cast<int>(parseInteger(v, "-n", 1, 1000000000)); break;
    case 'w': o.warmup = static_cast<int>(parseInteger(v, "-w", 0, 1000000000)); break;
    case 'c': o.check = parseInteger(v, "-c", 0, 1) == 1; break;
    case 'R': o.registerBuffers = parseInteger(v, "-R", 0, 1) == 1; break;
    case 'd': o.types = parseTypes(v); break;
    case 'o': o.ops = parseOps(v); break;
    case 'N': o.nranks = static_cast<int>(parseInteger(v, "-N", 1, 1024)); break;
    case 'T':
      // coil itself names the transports this build has when one is unknown.
      if (v.empty() || v.size() > 15 ||
          !std::all_of(v.begin(), v.end(), [](char ch) { return std::isalnum(ch) != 0; }))
        throw UsageError("--transport: '" + v + "' is not a transport name (shm, tcp, ib)");
      o.transport = v;
      break;
    case 'J': o.jsonPath = v; break;
    case 'B':
      if (v != "mpi") throw UsageError("--baseline: '" + v + "' is not a baseline (only: mpi)");
      o.baselineMpi = true;
      break;
    case 'C': o.collectives = parseCollectives(v); break;
    case 'r':
      o.allRoots = v == "all";
      if (!o.allRoots) o.root = static_cast<int>(parseInteger(v, "-r", 0, 1023));
      break;
    case 'K':
      if (v.empty()) throw UsageError("--calibrate needs a file name");
      o.calibratePath = v;
      break;
    case 'P': o.predict = true; break;
    case 'M': o.modelPath = v; break;
    case 'h': o.help = true; break;
  }
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
    if (flag == nullptr) throw UsageError("unknown argument '" + arg + "'");
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
  if (o.predict && o.modelPath.empty() && o.calibratePath.empty()) {
    throw UsageError("--predict needs the model's parameters: --model FILE, or --calibrate FILE");
  }
  if (!o.modelPath.empty() && !o.predict) throw UsageError("--model is only used by --predict");
  if (!o.help) sweepSizes(o.minBytes, o.maxBytes, o.factor, o.stepBytes);  // validates -b/-e/-f/-i
  return o;
}

void printUsage(std::FILE* out, const char* program) {
  std::fprintf(out,
      "usage: %s [flags]          bandwidth sweep of coil's collectives (nccl-tests style)\n"
      "  -C, --collective C       allreduce broadcast reduce allgather reducescatter alltoall\n"
      "                           gather scatter sendrecv, a comma list, or all (default\n"
      "                           allreduce; all runs them one after another)\n"
      "  -b, --minbytes SIZE      smallest size (default 8); K/M/G suffixes\n"
      "  -e, --maxbytes SIZE      largest size (default 64M)\n"
      "  -f, --stepfactor X       multiply the size by X each step (default 2)\n"
      "  -i, --stepbytes SIZE     add SIZE each step instead of -f\n"
      "  -n, --iters N            timed iterations per size (default 20)\n"
      "  -w, --warmup_iters N     untimed iterations before them (default 5)\n"
      "  -c, --check 0|1          verify results bit-exactly (default 1)\n"
      "  -d, --datatype T         float half bfloat16 double int8 uint8 int32 uint32\n"
      "                           int64 uint64, or all (default float)\n"
      "  -o, --op OP              sum prod max min avg, or all (default sum); only for\n"
      "                           allreduce, reduce and reducescatter (others print none)\n"
      "  -r, --root R|all         root of broadcast, reduce, gather, scatter (default 0);\n"
      "                           all: every rank in turn\n"
      "  -N, --nranks N           ranks to fork on this host (default 2; not with a launcher)\n"
      "      --transport NAME     force coil's transport: shm, tcp, ib (sets COIL_TRANSPORT)\n"
      "  -R, --register 0|1       coilCommRegister the buffers first (default 0; nccl-tests'\n"
      "                           -R): large sends and receives over ib then go zero-copy\n"
      "      --json FILE          also write every row as JSON\n"
      "      --baseline mpi       also time MPI's counterpart of each collective (needs\n"
      "                           mpirun and an MPI build)\n"
      "      --calibrate FILE     measure alpha, beta, gamma of the transport in use and\n"
      "                           write them to FILE (the COIL_TUNE_FILE format); no sweep\n"
      "      --predict            all-reduce ring and tree: the cost model's time next to\n"
      "                           the measured one, for every size of -b/-e/-f\n"
      "      --model FILE         parameters for --predict (default: --calibrate's fit)\n"
      "  -h, --help               this text\n"
      "Sizes (nccl-tests' convention): SIZE is the bytes of the whole operation. For\n"
      "allgather, reducescatter, alltoall, gather and scatter it is n blocks of count/n\n"
      "elements (rounded down to whole blocks); busbw = algbw * 2(n-1)/n for allreduce,\n"
      "(n-1)/n for allgather, reducescatter, alltoall, gather, scatter, and 1 for\n"
      "broadcast, reduce and sendrecv (ring: send to rank+1, receive from rank-1).\n"
      "In-place columns: allreduce, broadcast, reduce, allgather, reducescatter; n/a\n"
      "for the others.\n"
      "Launch: without a launcher, coil_perf forks -N ranks itself. Under mpirun it\n"
      "shares coil's id with MPI_Bcast (MPI builds) or uses MASTER_ADDR/MASTER_PORT;\n"
      "under torchrun or Slurm it uses RANK/WORLD_SIZE (SLURM_PROCID/SLURM_NTASKS)\n"
      "with MASTER_ADDR/MASTER_PORT. Exit status: 0 ok, 1 wrong results or a coil\n"
      "error, 2 bad usage.\n",
      program);
}

}  // namespace coil_perf
