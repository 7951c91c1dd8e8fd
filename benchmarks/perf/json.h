// The --json output: the run's header fields and every row, one object per
// row with flat keys, so tools/compare (and jq) can read it:
//   {"tool": "coil_perf", "nranks": 4, "transport": "shm", ...,
//    "collectives": ["allreduce", ...], "ranks": [...], "rows": [
//     {"collective": "allreduce", "size": 8, "count": 2, "type": "float",
//      "op": "sum", "root": null, "nranks": 4,
//      "transport": "shm", "oop_time_us": ..., "oop_algbw": ..., "oop_busbw": ...,
//      "oop_wrong": 0, "ip_time_us": ..., ..., "ip_wrong": 0,
//      "baseline": "mpi", "baseline_time_us": ..., "baseline_busbw": ...,
//      "baseline_ratio": ..., "baseline_note": null}, ...],
//    "avg_busbw": ..., "wrong_total": 0, "ok": true, "error": null}
// Absent values (unchecked #wrong, unmeasured baseline, the in-place
// columns of collectives without an in-place form, the root of unrooted
// collectives) are null; "op" is "none" for collectives that do not reduce.
#pragma once

#include <string>
#include <vector>

#include "report.h"

namespace coil_perf {

/// The outcome written after the rows.
struct RunSummary {
  long long wrongTotal = -1;  ///< -1: results not checked
  double avgBusbw = 0;
  bool ok = true;
  std::string error;  ///< why the run failed, "" if it did not
};

/// Writes the run as JSON to `path` (replacing it). Throws
/// std::runtime_error naming the path if it cannot be written.
void writeJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows,
               const RunSummary& summary);

/// `text` as a JSON string literal, quotes included.
std::string jsonString(const std::string& text);

}  // namespace coil_perf
