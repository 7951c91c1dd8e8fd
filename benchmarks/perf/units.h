// Byte sizes on the command line and the list of sizes a sweep visits.
// Shared by coil_perf and the baselines (gloo_perf).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace coil_perf {

/// A command-line mistake: the message is printed with the usage hint and
/// the program exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses "8", "64K", "64M", "1G" (binary multiples, as nccl-tests does)
/// into bytes. Throws UsageError naming `flag` if `text` is not a
/// non-negative size or overflows.
size_t parseBytes(const std::string& text, const char* flag);

/// Parses a decimal integer within [minValue, maxValue]; throws UsageError
/// naming `flag` otherwise.
long parseInteger(const std::string& text, const char* flag, long minValue, long maxValue);

/// The sizes (bytes) of a sweep from minBytes to maxBytes inclusive: either
/// multiplied by `factor` (> 1) each step, or, when stepBytes > 0, increased
/// by stepBytes. Throws UsageError if min > max or the step makes no progress.
std::vector<size_t> sweepSizes(size_t minBytes, size_t maxBytes, double factor,
                               size_t stepBytes);

/// Bytes in a short human form for headers ("64 MiB", "8 B").
std::string humanBytes(size_t bytes);

}  // namespace coil_perf
