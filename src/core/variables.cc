// Every COIL_* environment variable coil, its PyTorch adapter and its tools
// read, in one table (why: variables.h). A new variable must be added here
// before env::get will read it, and to README's table (a unit test compares
// the two). The ranges and words are the ones the readers accept.
#include "core/variables.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <atomic>

#include "core/log.h"

namespace coil::env {
namespace {

using enum Scope;

constexpr Variable integer(Scope s, std::string_view name, int64_t lo, int64_t hi,
                           std::string_view meaning) {
  return {name, s, Kind::kInteger, lo, hi, {}, false, meaning};
}
constexpr Variable byteSize(Scope s, std::string_view name, int64_t lo, int64_t hi,
                            std::string_view meaning) {
  return {name, s, Kind::kBytes, lo, hi, {}, false, meaning};
}
constexpr Variable boolean(Scope s, std::string_view name, std::string_view meaning) {
  return {name, s, Kind::kBoolean, 0, 1, {}, false, meaning};
}
constexpr Variable oneOf(Scope s, std::string_view name, std::string_view words, bool ignoreCase,
                         std::string_view meaning) {
  return {name, s, Kind::kOneOf, 0, 0, words, ignoreCase, meaning};
}
constexpr Variable listOf(Scope s, std::string_view name, std::string_view words, bool ignoreCase,
                          std::string_view meaning) {
  return {name, s, Kind::kListOf, 0, 0, words, ignoreCase, meaning};
}
constexpr Variable text(Scope s, std::string_view name, std::string_view meaning) {
  return {name, s, Kind::kText, 0, 0, {}, false, meaning};
}
constexpr Variable path(Scope s, std::string_view name, std::string_view meaning) {
  return {name, s, Kind::kPath, 0, 0, {}, false, meaning};
}

constexpr int64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kTiB = kGiB * 1024;
constexpr int64_t kMaxFifoSlots = 16;  // transports/slot_fifo.h kMaxSlots

constexpr Variable kVariables[] = {
    // Logging (core/log_settings.cc compares the words without case).
    oneOf(kLibrary, "COIL_DEBUG", "WARN INFO TRACE ERROR NONE", true, "log level"),
    listOf(kLibrary, "COIL_DEBUG_SUBSYS", "INIT BOOT NET SHM COLL TUNE ALL", true,
           "subsystems whose INFO and TRACE lines print; ^ excludes"),
    path(kLibrary, "COIL_DEBUG_FILE", "log file instead of stderr (%h host, %p pid)"),
    integer(kLibrary, "COIL_FLIGHT_RECORDER_ENTRIES", 0, 1 << 20,
            "operations each communicator remembers for its error dump; 0: off"),
    boolean(kLibrary, "COIL_FLIGHT_RECORDER_TIMING",
            "time each recorded operation to the microsecond (two TSC reads per call)"),
    path(kLibrary, "COIL_DEBUG_DUMP_ON_ERROR", "also append the dump to this file (%r %p %h)"),
    // Choices of transport and algorithm.
    oneOf(kLibrary, "COIL_TRANSPORT", "shm ib tcp", false, "force one transport for every peer"),
    text(kLibrary, "COIL_ALGO", "force algorithms: NAME or collective:NAME,..."),
    path(kLibrary, "COIL_TUNE_FILE", "cost model parameters from a file (coil_perf --calibrate)"),
    text(kLibrary, "COIL_TUNE", "cost model overrides: TRANSPORT[/ALGO]:key=value,..."),
    oneOf(kLibrary, "COIL_REDUCE_ISA", "generic avx2 avx512", false, "force reduction kernels"),
    // Init, rendezvous, authentication.
    integer(kLibrary, "COIL_TIMEOUT_MS", 1, kTiB, "deadline of every wait, ms"),
    boolean(kLibrary, "COIL_SPLIT_SHARE", "split children use their parent's connections"),
    text(kLibrary, "COIL_COMM_ID", "host:port of the rendezvous root"),
    text(kLibrary, "COIL_SECRET", "key material for a fixed root"),
    path(kLibrary, "COIL_SECRET_FILE", "per-user secret file (absolute path, or none)"),
    text(kLibrary, "COIL_SOCKET_IFNAME", "network interface for the bootstrap and tcp"),
    text(kLibrary, "COIL_HOSTID", "this rank's host, for shm: ranks with other ids are other hosts"),
    // tcp.
    integer(kLibrary, "COIL_NSOCKS", 1, 16, "TCP sockets per peer"),
    integer(kLibrary, "COIL_TCP_SLOTS", 1, kMaxFifoSlots, "TCP FIFO depth (power of two)"),
    byteSize(kLibrary, "COIL_TCP_SLOT_BYTES", 1, 64 * kMiB, "TCP FIFO slot size"),
    text(kLibrary, "COIL_TCP_CONGESTION", "TCP congestion control of the data sockets (reno, cubic, ...)"),
    // ib.
    text(kLibrary, "COIL_IB_HCA", "RDMA devices and ports to use (NCCL's syntax)"),
    integer(kLibrary, "COIL_IB_GID_INDEX", 0, 255, "GID index on RoCE"),
    integer(kLibrary, "COIL_IB_TIMEOUT", 1, 31, "queue pair ACK timeout exponent"),
    integer(kLibrary, "COIL_IB_RETRY_CNT", 0, 7, "queue pair retry count"),
    boolean(kLibrary, "COIL_IB_DISABLE", "never use the ib transport"),
    boolean(kLibrary, "COIL_LINK_PROBE",
            "0: do not time the link across hosts at init (rank 0 and one rank of another host)"),
    integer(kLibrary, "COIL_IB_SLOTS", 1, kMaxFifoSlots, "ib FIFO depth (power of two)"),
    byteSize(kLibrary, "COIL_IB_SLOT_BYTES", 4096, 64 * kMiB, "ib FIFO slot size"),
    byteSize(kLibrary, "COIL_IB_DIRECT_BYTES", 0, INT64_MAX,
             "zero-copy point-to-point from this size on; 0: never"),
    // shm and the shared window.
    integer(kLibrary, "COIL_SHM_SLOTS", 2, kMaxFifoSlots, "shm FIFO depth (power of two)"),
    byteSize(kLibrary, "COIL_SHM_SLOT_BYTES", 4096, 64 * kMiB, "shm FIFO slot size"),
    boolean(kLibrary, "COIL_SHM_WINDOW", "the one-host shared window (one-shot, slice)"),
    byteSize(kLibrary, "COIL_SHM_WINDOW_BYTES", 64 * kKiB, kGiB, "the shared window's slot size"),
    // Device buffers, waiting.
    byteSize(kLibrary, "COIL_STAGING_BYTES", 0, kTiB, "pinned host staging per communicator"),
    byteSize(kLibrary, "COIL_PEER_WINDOW_BYTES", 0, 16 * kGiB,
             "device memory each rank shares with its peers (x2); 0: none"),
    byteSize(kLibrary, "COIL_PEER_MIN_BYTES", 0, INT64_MAX,
             "device collectives from this size read the peers' windows"),
    oneOf(kLibrary, "COIL_PEER_IPC", "auto cumem legacy", false,
          "how peer windows are shared: cuMem descriptors, legacy CUDA IPC handles"),
    oneOf(kLibrary, "COIL_DEVICE_ORDER", "auto stream host", false,
          "device calls: streams wait on the host, or the host on streams"),
    oneOf(kLibrary, "COIL_SPIN", "adaptive always", false, "how waiting ranks wait"),
    integer(kLibrary, "COIL_SPIN_US", 0, 1000000, "longest pause-poll phase before sleeping, us"),
    integer(kLibrary, "COIL_YIELD_US", 0, 1000000, "longest yield-poll phase before sleeping, us"),
    // Topology (topo/binding.h; binding.cc compares the words without case).
    oneOf(kLibrary, "COIL_BIND", "none auto", true, "bind coil's own threads near the rank"),

    // The PyTorch adapter (src/torch, python/coil_torch) and its build.
    boolean(kTorch, "COIL_TORCH_CUDA", "0: the torch backend refuses CUDA tensors"),
    path(kTorch, "COIL_TORCH_EXT_DIR", "where coil_torch looks first for its extension module"),
    path(kTorch, "COIL_TORCH_PYTHON", "meson setup: the Python whose torch the adapter is for"),
    path(kTorch, "COIL_TORCH_VENV", "the venv tools/lib/torch-venv.sh makes and meson tries"),

    // The repository's tests, benchmarks and scripts (documented where read).
    path(kDevelopment, "COIL_ONECCL_PREFIX", "where tools/lib/oneccl-prefix.sh puts oneCCL and meson looks"),
    text(kDevelopment, "COIL_TEST_TRANSPORTS", "tests/harness: transports the rank tests run over"),
    integer(kDevelopment, "COIL_TEST_MAX_RANKS", 1, INT32_MAX,
            "tests/harness: the most ranks a collective test setup has"),
    integer(kDevelopment, "COIL_TEST_SHORT_TIMEOUT_MS", 1, INT32_MAX,
            "faults_test: TimeoutWhenAPeerNeverCalls's timeout (500 ms)"),
    integer(kDevelopment, "COIL_TEST_FD_ROUNDS", 1, INT32_MAX,
            "bootstrap_test: FdPassing's rounds of five processes (1000)"),
    integer(kDevelopment, "COIL_FAULT_TRIALS", 1, INT32_MAX, "kill_random_test: trials"),
    integer(kDevelopment, "COIL_FAULT_SEED", 0, INT32_MAX, "kill_random_test: first seed"),
    integer(kDevelopment, "COIL_PROGRAM_SEED", 0, INT32_MAX,
            "random_program_test: run this program alone"),
    integer(kDevelopment, "COIL_PROGRAMS", 1, INT32_MAX, "random_program_test: programs a setup"),
    boolean(kDevelopment, "COIL_PROGRAM_TRACE", "random_program_test: print each step"),
    boolean(kDevelopment, "COIL_CONVERT_EXHAUSTIVE", "device_convert_test: all 2^32 inputs"),
    text(kDevelopment, "COIL_TORCH_TEST_WORLDS", "tests/torch: world sizes, e.g. 2,3"),
    text(kDevelopment, "COIL_TORCH_TEST_TRACE", "tests/torch/test_p2p.py: any value traces"),
    integer(kDevelopment, "COIL_TORCH_PROGRAMS", 1, INT32_MAX,
            "tests/torch/test_random_programs.py: programs a world size"),
    integer(kDevelopment, "COIL_TORCH_PROGRAM_SEED", 0, INT64_MAX,
            "tests/torch/test_random_programs.py: run this program alone"),
    integer(kDevelopment, "COIL_TORCH_PROGRAM_BASE", 0, INT64_MAX,
            "tests/torch/test_random_programs.py: the first program's seed"),
    oneOf(kDevelopment, "COIL_TORCH_PROGRAM_BACKEND", "coil gloo", false,
          "tests/torch/test_random_programs.py: gloo checks the test itself"),
    boolean(kDevelopment, "COIL_TORCH_PROGRAM_TRACE",
            "tests/torch/test_random_programs.py: print each step"),
    text(kDevelopment, "COIL_TORCH_TEST_DEVICE",
         "tests/torch: cpu runs test_cuda.py on the CPU, cuda test_pipelining.py on GPUs"),
    integer(kDevelopment, "COIL_TORCHRUN_LAUNCHES", 0, INT32_MAX,
            "tests/port/torchrun_test.py: launches (0: the lone-rank check only)"),
    text(kDevelopment, "COIL_DIST_SUITE_ROLE", "tests/torch/suite: set for its child processes"),
    integer(kDevelopment, "COIL_DIST_SUITE_MARGIN", 0, INT32_MAX, "tests/torch/suite: watchdog, s"),
    text(kDevelopment, "COIL_DIST_SUITE_RUN_AS", "tests/torch/suite: backend the suite sees"),
    boolean(kDevelopment, "COIL_DIST_SUITE_PLAIN", "tests/torch/suite: without coil's patches"),
    text(kDevelopment, "COIL_DIST_SUITE_COMMIT", "tests/torch/suite: a tree's commit (no .git)"),
    path(kDevelopment, "COIL_PERF", "benchmarks/netns: the coil_perf binary"),
    path(kDevelopment, "COIL_BUILD_DIR", "tools/quickstart, run-tests, compare: build folder"),
    integer(kDevelopment, "COIL_JOBS", 1, INT32_MAX, "tools/quickstart: build jobs at most"),
    text(kDevelopment, "COIL_TEST_ARGS", "tools/run-tests: extra meson test arguments"),
    text(kDevelopment, "COIL_CI_MAY_SKIP", "tools/run-tests: suites CI may skip"),
    integer(kDevelopment, "COIL_FUZZ_SECONDS", 1, INT32_MAX, "tools/run-fuzz: seconds per target"),
    path(kDevelopment, "COIL_FUZZ_BUILD_DIR", "tools/run-fuzz: build folder"),
    path(kDevelopment, "COIL_SANITIZE_BUILD_DIR", "tools/run-tests: sanitizer build folder"),
    path(kDevelopment, "COIL_VENV_BASE_PYTHON", "tools/lib/torch-venv.sh: the venv's base Python"),
    boolean(kDevelopment, "COIL_COMPARE_REEXEC", "tools/compare: set when it re-executes itself"),
};

bool sameWord(std::string_view a, std::string_view b, bool ignoreCase) {
  if (a.size() != b.size()) return false;
  if (!ignoreCase) return a == b;
  return strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool isWord(const Variable& v, std::string_view word) {
  for (std::string_view w : words(v))
    if (sameWord(w, word, v.ignoreCase)) return true;
  return false;
}

std::string wordList(const Variable& v) {
  std::string out;
  for (std::string_view w : words(v)) (out += out.empty() ? "" : ", ") += w;
  return out;
}

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of neighbours (COIL_ALOG is one swap from COIL_ALGO).
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string unknownName(std::string_view name) {
  const Variable* best = nullptr;
  size_t bestDistance = 3;  // suggest only within 2 edits
  for (const Variable& v : kVariables)
    if (size_t dist = editDistance(name, v.name); dist < bestDistance) {
      best = &v;
      bestDistance = dist;
    }
  std::string out = std::string(name) + " is not a coil variable";
  if (best != nullptr) out += " (did you mean " + std::string(best->name) + "?)";
  return out;
}

// Empty when `value` fits the variable's kind, else why not.
std::string valueProblem(const Variable& v, std::string_view value) {
  const std::string quoted = std::string(v.name) + "=" + std::string(value);
  switch (v.kind) {
    case Kind::kInteger:
    case Kind::kBytes: {
      const std::string text(value);
      errno = 0;
      char* end = nullptr;
      const long long n = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0 && end != text.c_str() && *end == '\0' && n >= v.min && n <= v.max) return {};
      return quoted + " is not " + (v.kind == Kind::kBytes ? "a byte count" : "an integer") +
             " in [" + std::to_string(v.min) + ", " + std::to_string(v.max) + "]";
    }
    case Kind::kBoolean:
      return value == "0" || value == "1" ? std::string() : quoted + " is not 0 or 1";
    case Kind::kOneOf:
      return isWord(v, value) ? std::string() : quoted + " is not one of " + wordList(v);
    case Kind::kListOf: {
      std::string_view rest = value.starts_with('^') ? value.substr(1) : value;
      while (!rest.empty()) {
        const size_t comma = std::min(rest.find(','), rest.size());
        const std::string_view item = rest.substr(0, comma);
        if (!item.empty() && !isWord(v, item))
          return quoted + ": " + std::string(item) + " is not one of " + wordList(v);
        rest.remove_prefix(std::min(comma + 1, rest.size()));
      }
      return {};
    }
    case Kind::kText:
    case Kind::kPath:
      return {};
  }
  return {};
}

}  // namespace

std::span<const Variable> variables() { return kVariables; }

const Variable* findVariable(std::string_view name) {
  for (const Variable& v : kVariables)
    if (v.name == name) return &v;
  return nullptr;
}

std::vector<std::string_view> words(const Variable& v) {
  std::vector<std::string_view> out;
  std::string_view rest = v.words;
  while (!rest.empty()) {
    const size_t space = std::min(rest.find(' '), rest.size());
    if (space > 0) out.push_back(rest.substr(0, space));
    rest.remove_prefix(std::min(space + 1, rest.size()));
  }
  return out;
}

std::vector<std::string> environmentWarnings(const char* const* environment) {
  std::vector<std::string> out;
  for (const char* const* e = environment; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (!entry.starts_with("COIL_")) continue;
    const size_t eq = std::min(entry.find('='), entry.size());
    const std::string_view name = entry.substr(0, eq);
    const std::string_view value = entry.substr(std::min(eq + 1, entry.size()));
    const Variable* v = findVariable(name);
    if (v == nullptr) {
      out.push_back(unknownName(name));
    } else if (!value.empty()) {  // empty counts as unset (env::get)
      if (std::string problem = valueProblem(*v, value); !problem.empty())
        out.push_back(std::move(problem));
    }
  }
  return out;
}

void warnAboutEnvironmentOnce() {
  // An atomic, not std::call_once: a child forked while another thread
  // was inside a call_once would wait for it forever.
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  for (const std::string& w : environmentWarnings(environ)) COIL_WARN(kInit, w);
}

}  // namespace coil::env
