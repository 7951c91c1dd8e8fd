// The measurement loop: for every collective, type, operator, root and
// size, time coil's out-of-place and in-place forms (and MPI's counterpart,
// with --baseline mpi), then check one extra call of each outside the timed
// loop against expect.h's independently computed results.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "collectives.h"
#include "launch.h"
#include "options.h"
#include "progress.h"
#include "rank_buffers.h"
#include "report.h"

namespace coil_perf {

class Sweep {
 public:
  /// `table` is where rank 0 prints each row as soon as it is measured;
  /// nullptr on the other ranks. `buffers` (host or device, at least
  /// opts.maxBytes each) must outlive the sweep; with device buffers every
  /// call goes on their stream.
  Sweep(const Options& opts, const Participant& self, const Table* table, RankBuffers& buffers);

  /// Runs every row of every collective of opts.collectives, opts.runCycles
  /// times (0: until stopped); each collective gets its own column header
  /// and footer. Rank 0 first prints how many rows that is, and, on a
  /// terminal, a progress line on stderr. Every rank must call it (the
  /// rows are collective). Throws CoilFailure if coil fails,
  /// std::runtime_error for a root outside the communicator; wrong results
  /// do not throw.
  void run();

  /// One row to measure: the loops of runCollective, flattened.
  struct Planned {
    const TypeInfo* type;
    const OpInfo* op;
    int root;     ///< -1: the collective has none
    size_t bytes;
  };
  /// The rows of `coll`, in the order they are measured. Sizes that give the
  /// same element count as the previous one (below one element, or between
  /// two multiples of a block) are left out: each count is measured once.
  std::vector<Planned> plan(const CollectiveInfo& coll) const;

  /// The rows measured so far (complete on every rank).
  const std::vector<Row>& rows() const { return rows_; }
  /// Wrong elements summed over ranks and rows; -1 if -c 0.
  long long wrongTotal() const { return opts_.check() ? wrongTotal_ : -1; }

 private:
  void runCollective(const CollectiveInfo& coll, Progress& progress);
  /// "# 120 rows per cycle: allreduce 30, ..." before the first table.
  void printRowCount(size_t total, int cycles) const;
  /// opts.warmup untimed calls of the first row's type, op and root at
  /// `bytes` (the largest size), before any row.
  void warmUp(const CollectiveInfo& coll, const Planned& first, size_t bytes);
  Row measure(const CollectiveInfo& coll, const TypeInfo& type, const OpInfo& op, int root,
              size_t bytes);
  /// The out-of-place call of `coll` on this sweep's buffers.
  CollCall outOfPlace(const CollectiveInfo& coll, const Layout& layout, const TypeInfo& type,
                      const OpInfo& op, int root);
  /// One checked call: poisoned output, fresh input; returns the wrong
  /// count summed over ranks.
  long long checkedCall(const CollCall& call, const Layout& layout, bool inPlace);
  /// opts.checkIters checked calls (-c); their wrong counts summed.
  long long checkedCalls(const CollCall& call, const Layout& layout, bool inPlace);
  /// Writes `call`'s input (fillCollectiveInput) into the buffers, through
  /// the host mirrors with device buffers.
  void fillInput(const CollCall& call, const Layout& layout);
  /// `call` with its pointers moved to the host mirrors (itself with host buffers).
  CollCall onHost(const CollCall& call) const;
  /// The bytes of each buffer a call of `layout` can touch.
  static size_t extent(const Layout& layout, const TypeInfo& type);
  /// The roots to run `coll` with: {-1} when it has none.
  std::vector<int> roots(const CollectiveInfo& coll) const;

  const Options& opts_;
  const Participant& self_;
  const Table* table_;
  RankBuffers& buffers_;
  /// -R 1: the buffers' coilCommRegister handles, deregistered at the end.
  struct Registered {
    coilComm_t comm = nullptr;
    void* handle = nullptr;
    Registered() = default;
    Registered(coilComm_t c, void* buffer, size_t bytes);
    ~Registered();
    Registered(const Registered&) = delete;
    Registered& operator=(const Registered&) = delete;
  };
  std::unique_ptr<Registered> sendRegistered_, recvRegistered_;
  /// -R 2: the device buffers as windows, deregistered at the end (collective).
  struct Window {
    coilComm_t comm = nullptr;
    coilWindow_t window = nullptr;
    Window(coilComm_t c, void* buffer, size_t bytes);
    ~Window();
    Window(const Window&) = delete;
    Window& operator=(const Window&) = delete;
  };
  std::unique_ptr<Window> sendWindow_, recvWindow_;
  std::vector<Row> rows_;
  long long wrongTotal_ = 0;
  int mismatchReports_ = 0;  // this rank's mismatch lines on stderr, capped
  size_t rowsDone_ = 0;      // for the progress line
};

}  // namespace coil_perf
