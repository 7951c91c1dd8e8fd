// The measurement loop: for every type, operator and size, time coil's
// out-of-place and in-place all-reduce (and MPI's, with --baseline mpi),
// then check one extra call of each outside the timed loop.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "launch.h"
#include "options.h"
#include "report.h"

namespace coil_perf {

class Sweep {
 public:
  /// `table` is where rank 0 prints each row as soon as it is measured;
  /// nullptr on the other ranks. Allocates buffers of opts.maxBytes.
  Sweep(const Options& opts, const Participant& self, const Table* table);

  /// Runs every row. Every rank must call it (the rows are collective).
  /// Throws CoilFailure if coil fails; wrong results do not throw.
  void run();

  /// The rows measured so far (complete on every rank).
  const std::vector<Row>& rows() const { return rows_; }
  /// Wrong elements summed over ranks and rows; -1 if -c 0.
  long long wrongTotal() const { return opts_.check ? wrongTotal_ : -1; }

 private:
  using Buffer = std::unique_ptr<void, void (*)(void*)>;

  /// opts.warmup untimed calls at `bytes` (the largest size), before any row.
  void warmUp(size_t bytes);
  Row measure(const TypeInfo& type, const OpInfo& op, size_t bytes);
  /// Mean seconds per call of this rank, after warmup and a barrier.
  double timeCalls(const void* send, void* recv, size_t count, const TypeInfo& type,
                   const OpInfo& op);
  /// One checked call: poisoned output, fresh input; returns the wrong
  /// count summed over ranks.
  long long checkedCall(bool inPlace, size_t count, const TypeInfo& type, const OpInfo& op,
                        size_t bytes);
  void allReduce(const void* send, void* recv, size_t count, const TypeInfo& type,
                 const OpInfo& op);

  const Options& opts_;
  const Participant& self_;
  const Table* table_;
  Buffer send_;
  Buffer recv_;
  std::vector<Row> rows_;
  long long wrongTotal_ = 0;
  int mismatchReports_ = 0;  // this rank's mismatch lines on stderr, capped
};

}  // namespace coil_perf
