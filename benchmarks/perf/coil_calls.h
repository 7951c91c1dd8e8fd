// Thin C++ wrappers over coil.h for coil_perf: failures become exceptions
// carrying coilGetLastError's text, and the small collectives the benchmark
// itself needs (max of timings, sum of error counts, the host table) run
// through coilAllReduce too.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "coil.h"
#include "collectives.h"
#include "options.h"

namespace coil_perf {

/// A coil call failed. what() names the call and carries coil's message.
class CoilFailure : public std::runtime_error {
 public:
  CoilFailure(const std::string& what, coilResult_t result)
      : std::runtime_error(what), result_(result) {}
  coilResult_t result() const { return result_; }

 private:
  coilResult_t result_;
};

/// "<call>: <coilGetLastError(comm)> [<result's enum name>]" (the call's
/// name is not repeated when coil's message starts with it). comm may be
/// NULL: the calling thread's last error.
std::string describeFailure(coilResult_t result, const char* call, coilComm_t comm);

/// Throws CoilFailure(describeFailure(...)) unless result is coilSuccess.
void coilCheck(coilResult_t result, const char* call, coilComm_t comm);

/// Issues `call` on `comm` (this rank is `rank` of `nranks`) on `stream`
/// (NULL for host buffers; device buffers' calls are only enqueued). Send/recv
/// is the ring of nccl-tests' sendrecv: in one group, send to rank+1 and
/// receive from rank-1. Throws CoilFailure naming the call.
void runCoil(const CollCall& call, coilComm_t comm, int rank, int nranks,
             coilStream_t stream = nullptr);

/// How timeCoil times a call: nccl-tests' -w, -n, -m, -z and -a.
struct Timing {
  int warmup = 5;
  int iters = 20;
  int aggIters = 1;   ///< calls per timed iteration, in one group
  int blocking = 0;   ///< 1 or 3: a barrier after each timed iteration
  Average average = Average::Max;
  coilStream_t stream = nullptr;  ///< the calls' stream (device buffers)
  /// Device buffers: waits for `stream` (nccl-tests' stream synchronize) after
  /// the warm-up, after each iteration when blocking != 0, and before the
  /// clock stops. Empty for host buffers, whose calls return complete.
  std::function<void()> sync = nullptr;
};

/// Runs `call` `t.warmup` times untimed, meets the other ranks, runs
/// `t.iters` iterations of `t.aggIters` calls each (waiting for t.stream
/// before the clock stops, if t.sync is set), and returns the mean
/// seconds per call, combined over ranks as `t.average` says (every rank
/// must call it with the same shape).
double timeCoil(const CollCall& call, coilComm_t comm, int rank, int nranks, const Timing& t);

/// One value for all ranks: rank 0's, the mean, the min or the max of
/// every rank's `value` (coilAllReduce of one double).
double combineOverRanks(coilComm_t comm, double value, Average how, int rank, int nranks);

/// The maximum of `value` over all ranks (coilAllReduce, coilMax, double).
double maxOverRanks(coilComm_t comm, double value);

/// The sum of `value` over all ranks (coilAllReduce, coilSum, uint64).
uint64_t sumOverRanks(coilComm_t comm, uint64_t value);

/// Every rank's `text` (truncated to 63 bytes), indexed by rank: each rank
/// writes its slot of a zeroed table and a uint8 sum all-reduce merges them.
std::vector<std::string> gatherText(coilComm_t comm, int rank, int nranks,
                                    const std::string& text);

}  // namespace coil_perf
