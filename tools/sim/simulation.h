// One collective, run symbolically on every rank at once: what coil-sim
// prints, draws and animates.
//
// The library's own program for the algorithm (algorithms/registry.h) runs
// under the tracing executor on every rank; the traces are then replayed in
// synchronous rounds. In each round every rank runs at most one primitive: a
// receive may use a message sent in an earlier round (a sendRecv's send half
// goes out at the start of its round, so both halves of a pairwise exchange
// meet in one round). Round t is "step t+1" of the text, the diagram and
// the page (step 0: before the first round). The replay
// carries, for every element, the set of ranks whose input it contains.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/trace_executor.h"

namespace coil::sim {

/// What to simulate.
struct Request {
  algo::CollKind collective = algo::CollKind::AllReduce;
  const algo::AlgorithmProgram* algorithm = nullptr;
  int nranks = 4;
  size_t count = 8;        // elements (per-rank block for allgather, reducescatter, alltoall,
                           // gather, scatter: as the C API's count)
  size_t chunkElems = 0;   // 0: one round (all-reduce: count / nranks + 1; else count)
  int root = 0;
  std::vector<int> hostOf; // host of each rank (hier, and where a window program has a
                           // form across hosts); empty: one host
  size_t elementBytes = 4; // float32: the cost model's bytes
};

/// Which of its entry's programs a request runs, as the collective driver
/// would: a window program where the ranks share a window (one host), its
/// form over FIFOs where they span hosts (algo::FifoForm); the rooted
/// one-shot (kExchange) as the library runs it without a window, on one
/// host or several.
enum class Form { kPrimitives, kWindow, kFifo, kExchange };

/// The form `request` runs. Throws std::invalid_argument for a window
/// program without a FIFO form (slice) across hosts.
Form formFor(const Request& request);

/// True when `hostOf` puts the ranks on more than one host.
bool spansHosts(const std::vector<int>& hostOf);

/// The ranks whose input an element contains: bit q = rank q (at most 64 ranks).
using Contributors = uint64_t;

/// One primitive of one rank, placed in the round it ran in.
struct Action {
  int rank;
  size_t index;            // its position in the rank's trace
  int round;
  algo::TraceStep step;
  int messageIn = -1;      // index into Simulation::messages, or -1
  int messageOut = -1;
};

/// One message between two ranks.
struct Message {
  int from, to;
  int sentRound, receivedRound;
  size_t offset, count;    // span of the sender's buffer it came from (elements)
  std::vector<Contributors> values;
  bool exchange = false;   // a sendRecv's send half: receivable in its own round
};

struct Simulation {
  Request request;
  Form form = Form::kPrimitives;
  size_t inputElems = 0, outputElems = 0;  // per rank
  std::vector<std::vector<algo::TraceStep>> programs;  // per rank, as traced
  std::vector<Action> actions;             // in round order, then rank order
  std::vector<Message> messages;
  int rounds = 0;
  /// outputs[t][r]: rank r's output buffer after round t (t = 0 .. rounds;
  /// outputs[0] is the state before the first round).
  std::vector<std::vector<std::vector<Contributors>>> outputs;
  bool deadlocked = false;                 // a rank could not finish
  /// Elements whose final value differs from the collective's definition
  /// (algo::expectedContributions), as "rank r element i: has {..}, wants {..}".
  std::vector<std::string> wrong;

  /// The C++ name and one-line summary of the program that ran.
  const char* function() const;
  const char* summary() const;
};

/// Runs the request. Throws std::invalid_argument naming a bad request.
Simulation simulate(const Request& request);

/// "0123" / "01.3": the ranks an element contains, one character per rank.
std::string contributorsText(Contributors c, int nranks);

/// α-β-γ cost of each round, with the tuner's model: a round costs its
/// slowest action; a message costs α + β per byte in the round it arrives,
/// a local copy β per byte, a reduction γ per byte.
struct CostParams {
  double alphaUs = 1.0, betaUsPerB = 1e-4, gammaUsPerB = 5e-5;
  std::string source;  // where they came from, for the printout
};
struct RoundCost {
  double alphaUs = 0, betaUs = 0, gammaUs = 0;
  double total() const { return alphaUs + betaUs + gammaUs; }
};
std::vector<RoundCost> roundCosts(const Simulation& s, const CostParams& p);

}  // namespace coil::sim
