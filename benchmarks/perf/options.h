// coil_perf's command line. A flag nccl-tests' *_perf programs have means
// what it means there, with the same default; coil's own flags use letters
// nccl-tests does not (-P, -C) or long names only.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives.h"
#include "dtypes.h"

namespace coil_perf {

/// -a: how the ranks' times become the one a row reports (nccl-tests' 0..3).
enum class Average { Rank0 = 0, Mean = 1, Min = 2, Max = 3 };

/// --memory: where the sweep's buffers are.
enum class Memory {
  Default,  ///< not given: device where coil has CUDA and a device is usable (main decides)
  Host,
  Device,
};

struct Options {
  size_t minBytes = 8;                  ///< -b
  size_t maxBytes = size_t{64} << 20;   ///< -e
  double factor = 2.0;                  ///< -f (used when stepBytes == 0)
  size_t stepBytes = 0;                 ///< -i (linear steps instead of -f)
  int iters = 20;                       ///< -n
  int warmup = 5;                       ///< -w
  int aggIters = 1;                     ///< -m: calls per group (per timed iteration)
  int checkIters = 1;                   ///< -c: checked calls per row; 0 = no check
  Average average = Average::Mean;      ///< -a
  int blocking = 0;                     ///< -z: 1 barrier after each call, 3 after each group
  int timeoutSeconds = 0;               ///< -T: sets COIL_TIMEOUT_MS; 0 = coil's default
  int runCycles = 1;                    ///< -N: sweeps; 0 = until stopped
  int threads = 1;                      ///< -t: ranks as threads of each process
  int cudaGraphLaunches = 0;            ///< -G: accepted; there are no CUDA graphs on the host
  bool registerBuffers = false;         ///< -R 1: coilCommRegister the buffers
  bool windowBuffers = false;           ///< -R 2: coilCommWindowRegister the (device) buffers
  std::vector<TypeInfo> types;          ///< -d (default float)
  std::vector<OpInfo> ops;              ///< -o (default sum)
  bool allOpsAsked = false;             ///< -o all: skip the pairs a type does not take
  int nprocs = 0;                       ///< -P: processes to fork; 0 = not given
  std::string transport;                ///< --transport; empty = leave COIL_TRANSPORT as is
  std::string jsonPath;                 ///< --json
  bool baselineMpi = false;             ///< --baseline mpi
  Memory memory = Memory::Default;      ///< --memory host|device
  std::vector<CollectiveInfo> collectives;  ///< -C (default allreduce)
  int root = 0;                         ///< -r
  bool allRoots = false;                ///< -r all: every rank in turn
  std::string calibratePath;            ///< --calibrate FILE; empty = no calibration
  bool predict = false;                 ///< --predict
  std::string modelPath;                ///< --model FILE (for --predict)
  bool help = false;                    ///< -h
  bool version = false;                 ///< --version

  /// -c as a yes/no: are results checked at all.
  bool check() const { return checkIters > 0; }
};

/// Parses argv. Throws UsageError (with a message naming the flag) on an
/// unknown flag, a missing or malformed value, inconsistent sizes, or
/// --predict without a model (--model, or --calibrate in the same run).
Options parseOptions(int argc, char** argv);

/// Writes the flag summary to `out`.
void printUsage(std::FILE* out, const char* program);

/// Every spelling the parser accepts ("-b", "--minbytes", ...), for the
/// self-test that --help lists them all.
std::vector<std::string> flagSpellings();

}  // namespace coil_perf
