// The coil_perf sweep (float sum all-reduce, out of place then in place,
// every result checked) over another library, for the baselines gloo_perf
// and oneccl_perf: their flags, the forked ranks, the table and the JSON
// are this file's, so the two read and parse as coil_perf does. A baseline
// supplies only how its ranks connect (BaselineTool::connect) and its
// all-reduce (BaselineRank).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "local_ranks.h"

namespace coil_perf {

/// One connected rank of the library under measure.
class BaselineRank {
 public:
  virtual ~BaselineRank() = default;
  /// out = sum over ranks of in, float32; in == out means in place.
  virtual void allreduceFloatSum(const float* in, float* out, size_t count) = 0;
  /// Called before the untimed warm-up calls of each (size, placement) with
  /// the buffers the timed calls will use: a library whose operations are
  /// objects made for given buffers makes them here, outside the timing.
  virtual void prepare(const float* /*in*/, float* /*out*/, size_t /*count*/) {}
  /// In place over ranks: the largest value; the sum of each byte (the
  /// harness's barrier, timing and checking use these).
  virtual double maxOverRanks(double value) = 0;
  virtual uint64_t sumOverRanks(uint64_t value) = 0;
  virtual void sumBytesOverRanks(uint8_t* bytes, size_t n) = 0;
  /// What the run's header says the transport was, once connected.
  virtual std::string transportName() const = 0;
};

/// The flags every baseline takes (coil_perf's names).
struct BaselineOptions {
  size_t minBytes = 8;
  size_t maxBytes = size_t{64} << 20;
  double factor = 2.0;
  size_t stepBytes = 0;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  int nranks = 2;
  std::string jsonPath;
};

/// What one baseline adds to the common flags.
struct BaselineTool {
  std::string name;         ///< "gloo_perf"
  std::string description;  ///< after the usage line: "float sum all-reduce sweep over ..."
  std::string extraUsage;   ///< its own flags' help lines, each ending in '\n'
  /// Takes one of its own flags and its value; false = not one of them.
  /// Throws UsageError on a bad value.
  std::function<bool(const std::string& flag, const std::string& value)> takeFlag;
  /// Connects this process's rank, after the fork and before any thread.
  /// Rank 0 must call ranks.share() (with what the others need, or
  /// nothing), the others ranks.receive() when they expect something.
  std::function<std::unique_ptr<BaselineRank>(LocalRanks& ranks, int rank, int nranks)> connect;
  /// Optional: run by rank 0 after every rank has exited, e.g. to remove
  /// what connect() made.
  std::function<void()> cleanUp;
};

/// Parses argv (exits 0 on -h, 2 on a usage error), forks the ranks,
/// connects them, runs the sweep and prints it (rank 0); writes --json.
/// Returns the process's exit status: 0 when every rank finished and no
/// value was wrong.
int runBaseline(int argc, char** argv, BaselineOptions& options, const BaselineTool& tool);

}  // namespace coil_perf
