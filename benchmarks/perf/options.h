// coil_perf's command line, with the flags and defaults of nccl-tests'
// *_perf programs where the two overlap.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives.h"
#include "dtypes.h"

namespace coil_perf {

struct Options {
  size_t minBytes = 8;                  ///< -b
  size_t maxBytes = size_t{64} << 20;   ///< -e
  double factor = 2.0;                  ///< -f (used when stepBytes == 0)
  size_t stepBytes = 0;                 ///< -i (linear steps instead of -f)
  int iters = 20;                       ///< -n
  int warmup = 5;                       ///< -w
  bool check = true;                    ///< -c
  bool registerBuffers = false;         ///< -R: coilCommRegister the buffers
  std::vector<TypeInfo> types;          ///< -d (default float)
  std::vector<OpInfo> ops;              ///< -o (default sum)
  int nranks = 0;                       ///< -N; 0 = not given
  std::string transport;                ///< --transport; empty = leave COIL_TRANSPORT as is
  std::string jsonPath;                 ///< --json
  bool baselineMpi = false;             ///< --baseline mpi
  std::vector<CollectiveInfo> collectives;  ///< -C (default allreduce)
  int root = 0;                         ///< -r
  bool allRoots = false;                ///< -r all: every rank in turn
  std::string calibratePath;            ///< --calibrate FILE; empty = no calibration
  bool predict = false;                 ///< --predict
  std::string modelPath;                ///< --model FILE (for --predict)
  bool help = false;                    ///< -h
};

/// Parses argv. Throws UsageError (with a message naming the flag) on an
/// unknown flag, a missing or malformed value, inconsistent sizes, or
/// --predict without a model (--model, or --calibrate in the same run).
Options parseOptions(int argc, char** argv);

/// Writes the flag summary to `out`.
void printUsage(std::FILE* out, const char* program);

}  // namespace coil_perf
