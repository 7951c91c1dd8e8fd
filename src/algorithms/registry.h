// The registry of coil's algorithm programs: one entry per (collective,
// algorithm) that runs as a per-rank program over Primitives.
//
// Everything that needs to know an algorithm reads it here:
//   - the collective driver (src/comm/collective_driver.cc) finds the
//     program for the tuner's choice and sets up the buffers its layout asks;
//   - coil-sim lists, traces and replays any collective × algorithm;
//   - the schedule replay (tests/algorithms/schedule_test.cc) checks every
//     entry for deadlock freedom and exact contributions.
// Adding an algorithm: one file with its program (collectives.h) and one
// line in registry.cc. The names are COIL_ALGO's (src/tune/tuner.h).
//
// Three kinds of program: per-rank programs over Primitives (FIFO links,
// run by FifoExecutor); the all-reduces over the shared-memory window
// (window_programs.h: run by WindowExecutor in window_allreduce.cc, traced
// by WindowTrace); and the one-shot over FIFOs (fifo_oneshot_program.h: run
// in fifo_oneshot.cc, traced by FifoOneShotTrace). "oneshot" names both
// one-shots, as it does for COIL_ALGO and the tuner: its entry holds the
// window program and, as its form without a window, the FIFO program; the
// driver runs the first where the ranks share a window (one host), the
// second where they do not (across hosts, or COIL_SHM_WINDOW=0). The
// "registered" programs of every collective but the gather and the scatter
// (the direct programs) run only on device buffers registered as windows, and
// the "peer" programs of every other collective only on device buffers
// through the peer windows' slots (deviceOnly says which). The "oneshot" of
// broadcast, reduce, gather and scatter is the rooted one-shot
// (rooted_oneshot_program.h: run in src/comm/fused_rooted_call.cc, traced
// by RootedOneShotTrace): their data in their call's agreement, without a
// shared window.
#pragma once

#include <string_view>
#include <vector>

#include "algorithms/fifo_oneshot_trace.h"
#include "algorithms/fingerprint.h"
#include "algorithms/primitives.h"
#include "algorithms/rooted_oneshot_trace.h"
#include "algorithms/window_trace.h"

namespace coil::algo {

using Program = void (*)(Primitives&, const CallShape&);

/// Where a program reads its input and writes its output. In-place layouts
/// run with input == output: the driver first copies the rank's input into
/// its output buffer (where the layout says), and the program reads and
/// accumulates there.
enum class Layout {
  kSeparate,        // input and output are the caller's two buffers
  kInPlace,         // output starts as this rank's input (every rank)
  kInPlaceAtRoot,   // the root's output starts as its input; others receive into theirs
  kInPlaceOwnBlock, // this rank's input is block `rank` of its output (all-gather)
  kAccumulate,      // the root accumulates in its output, a rank that reduces two
                    // children in scratch; the others only read their input (tree reduce)
  kScratch,         // in place on a scratch copy of the whole input (n blocks); this
                    // rank's result is its own block of it, copied to the output after
};

/// How many blocks of `count` elements a rank's buffers span.
enum class Blocks { kOne, kPerRank };

/// A window program's form over FIFOs: what runs instead where the ranks
/// share no window. Same name, collective and buffers as its entry.
struct FifoForm {
  const char* function = nullptr;  // the program's C++ name
  const char* summary = nullptr;   // one line: what each rank does
  FifoOneShotTraceProgram program = nullptr;
};

/// Window programs that no host engine runs: device buffers only.
enum class DeviceOnly {
  kNo,
  kPeerWindows,        // through the slots of the peer windows (api/peer_windows.h)
  kRegisteredWindows,  // slots are the ranks' own input (slot 0) and output (slot 1),
                       // registered as windows (registered_collectives.h)
};

struct AlgorithmProgram {
  CollKind collective;
  const char* name;      // as COIL_ALGO spells it: "ring", "tree", "chain", ...
  const char* function;  // the program's C++ name, for docs and test names
  Program program;       // null for a window program
  Layout layout;
  Blocks input;          // input buffer: count or count × nranks elements
  Blocks output;
  bool outputAtOwnBlock; // output[0] stands for element rank × count (reduce-scatter)
  const char* summary;   // one line: what each rank does
  /// A window program (all-reduce on one host) instead of `program`.
  WindowTraceProgram windowProgram = nullptr;
  /// The window program's form without a window (across hosts); none when
  /// program is null (then the algorithm needs a window: slice).
  FifoForm withoutWindow{};
  /// A window program for device buffers only: no host engine runs it,
  /// COIL_ALGO cannot name it, coil-sim shows it.
  DeviceOnly deviceOnly = DeviceOnly::kNo;
  /// The rooted one-shot instead of `program` (broadcast, reduce, gather,
  /// scatter: "oneshot").
  RootedOneShotTraceProgram rootedOneShot = nullptr;
  /// Its slots are the ranks' own buffers (registered windows).
  bool readsCallerBuffers() const { return deviceOnly == DeviceOnly::kRegisteredWindows; }
  bool onWindow() const { return windowProgram != nullptr; }
  bool hasFifoForm() const { return withoutWindow.program != nullptr; }
  bool isRootedOneShot() const { return rootedOneShot != nullptr; }
};

/// Every registered program, collective by collective.
const std::vector<AlgorithmProgram>& algorithmPrograms();

/// The entry for `collective` run by the algorithm called `name`, or null.
/// A barrier runs the all-reduce's programs on one element.
const AlgorithmProgram* findProgram(CollKind collective, std::string_view name);

/// The collectives coil-sim and the tests know, parsed from their names
/// ("allreduce", "reducescatter", ...); false for an unknown name.
bool parseCollective(std::string_view name, CollKind* kind);

/// What a rank's output holds when the collective completes: the inputs
/// of each output element, as (rank, input element) pairs; empty where
/// the output is unspecified (a non-root rank's output of reduce/gather).
/// The independent reference the schedule replay and coil-sim check against.
std::vector<std::pair<int, size_t>> expectedContributions(CollKind collective, int rank, int nranks,
                                                          size_t count, int root,
                                                          size_t outputElement);

}  // namespace coil::algo
