// Algorithm choice per call, from a cost model.
//
// Each algorithm's time is predicted with the α-β-γ model (docs/algorithms.md,
// docs/performance.md), with parameters per transport AND algorithm:
//   α  µs per synchronisation step (a slot hand-off on a link, or one
//      flag handshake through the shared window)
//   β  µs per byte moved (over the link, or copied through the window)
//   γ  µs per byte reduced
// The FIFO algorithms (ring, tree, and one-shot over FIFOs) use the
// parameters of the slowest transport the communicator uses; the window
// algorithms (one-shot and slice over a shared-memory window) their own.
// Defaults were measured on the reference machine with coil_perf
// (docs/performance.md). A calibration file (COIL_TUNE_FILE, written by
// `coil_perf --calibrate`) replaces them, COIL_TUNE overrides any of them,
// and COIL_ALGO forces an algorithm. The ranks of a communicator all use
// rank 0's parameters (ModelParams), so they always choose alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/fingerprint.h"
#include "algorithms/tree_shape.h"
#include "transports/link_cost.h"

namespace coil::tune {

/// Every algorithm coil has, over all collectives.
enum class Algo { kRing, kTree, kOneShot, kSlice, kChain, kPairwise, kDirect, kHier };

/// "ring", "tree", "oneshot", "slice", "chain", "pairwise", "direct", "hier".
const char* algoName(Algo a);
/// The algorithm called `name` (algoName's spelling); false when none is.
bool parseAlgo(const std::string& name, Algo* out);

/// α-β-γ parameters of one algorithm on one transport (see the file comment):
/// the same numbers a transport states for its links.
using Cost = transport::LinkCost;

/// What the communicator offers its algorithms.
struct Topology {
  int nranks = 1;
  std::string transport = "shm";  // the slowest transport in use (its name: COIL_TUNE targets, logs)
  Cost fifo{};                    // its ring/tree costs (transport::Traits::fifo)
  Cost oneShot{};                 // its FIFO one-shot costs (transport::Traits::oneShot)
  Cost callerPath{};              // its FIFO programs' costs on the caller-driven paths
                                  // (transport::Traits::callerPath)
  std::vector<std::string> transports;  // every transport of this build (COIL_TUNE may name any)
  size_t chunkBytes = 0;          // ring/tree chunk (FIFO slice × slices per chunk): the largest
  size_t sliceBytes = 0;          // one FIFO slice: chunks are whole slices (0: chunkBytes only)
  size_t fifoSlotBytes = 0;       // one FIFO slot: the largest FIFO one-shot message
  size_t callerPieceBytes = 0;    // the largest message every rank's caller-driven paths
                                  // to every peer carry (transports/caller_io.h); 0: a rank
                                  // has a peer without one
  bool mixedCallerPaths = false;  // links of both kinds (shm inside hosts, tcp across): the FIFO
                                  // programs send on the caller-driven paths where a link has one,
                                  // on the FIFOs elsewhere, in chunks of whole slices
  size_t windowSlotBytes = 0;     // one window slot; 0 when there is no shared window
  size_t windowInlineBytes = 0;   // largest message that travels with its flag
  int cores = 0;                  // CPUs the ranks of a host may run on, pooled
                                  // (comm/cpu_share.h); 0 = unknown
  int hosts = 1;                  // hosts the ranks are on
  int smallestHost = 1;           // ranks on the host with the fewest
  int largestHost = 1;            // ranks on the host with the most
  Cost local{};                   // FIFO costs inside a host (the hierarchical all-reduce's
                                  // local phases); fifo's when every peer is local
  size_t cacheBytes = 0;          // last-level cache; 0 = unknown (8 MiB assumed)
  bool userTuning = true;         // apply COIL_TUNE_FILE and COIL_TUNE; false: the built-in
                                  // parameters only (coil-sim's models, whose costs its flags set)
};

/// Every number a prediction uses besides the topology. Trivially copyable:
/// a communicator's ranks exchange it at init and all adopt rank 0's.
struct ModelParams {
  Cost ring, tree, fifoOneShot, windowOneShot, slice;
  Cost local;                // inside a host (Topology::local): the hierarchical local phases
  double lineTransferUs;     // one cache-line transfer between cores (window one-shot)
  uint64_t slicePieceBytes;  // window slice: bytes per piece
  uint64_t streamFromBytes;  // window slice: streaming stores from this size on
  uint64_t cacheBytes;       // the last-level cache the memory factor refers to
  uint32_t probeLink;        // 1: rank 0 measures the link across hosts at init (link_probe.cc)
  uint64_t callerPieceBytes; // the FIFO programs run on the caller-driven paths in pieces of
                             // this many bytes (algorithms/caller_path_executor.h); 0: on the FIFOs
  uint64_t messagePieceBytes; // point-to-point messages' pieces there (comm/p2p_caller_path.h)
  uint32_t mixedCallerPaths; // 1: Topology::mixedCallerPaths, and COIL_TUNE left it on
};

struct Prediction {
  Algo algorithm;
  double microseconds;
};

/// The result of choose().
struct Choice {
  Algo algorithm;
  bool forced;             // COIL_ALGO chose it
  bool forcedUnavailable;  // COIL_ALGO named one that cannot run this call: the model chose
  size_t chunkBytes = 0;   // the chunk of a FIFO algorithm for this call (Model::chunkFor)
};

class AlgorithmOverride;

/// The cost model of one communicator. Used by one thread at a time (the
/// communicator's caller), like the communicator itself.
class Model {
 public:
  Model() = default;
  /// Defaults for the topology's transport, then the lines of the file
  /// named by COIL_TUNE_FILE, then COIL_TUNE. Both name a TARGET and set
  /// parameters:
  ///   COIL_TUNE="tcp:alpha=20,beta=0.0005;window/slice:beta=0.00005"
  ///   COIL_TUNE_FILE lines:  "shm alpha_us=0.9 beta_us_per_byte=6.7e-05"
  ///                          ("#" starts a comment line)
  /// TARGET "T" sets the FIFO algorithms of transport T (ring, tree,
  /// oneshot), "T/A" one algorithm: T is shm, tcp or window; A an algorithm
  /// name. Keys: alpha (or alpha_us), beta (beta_us_per_byte), gamma
  /// (gamma_us_per_byte), memory (memory_factor: Cost::memoryFactor); a
  /// "window/slice" target also takes piece=BYTES and stream=BYTES (the
  /// message size from which the output is written with streaming stores);
  /// a transport target alone also takes caller=BYTES (the piece of the
  /// FIFO programs on the caller-driven paths, at most the paths' largest
  /// message; 0 runs them on the FIFOs).
  /// Entries for another transport are ignored. Throws coilInvalidUsage
  /// naming a bad entry, or a file that cannot be read.
  explicit Model(const Topology& topology);

  const Topology& topology() const { return topo_; }
  /// The parameters used for `algorithm` on this topology.
  const Cost& cost(Algo algorithm) const;
  /// All parameters, and replacing them (with another rank's).
  const ModelParams& params() const { return p_; }
  void adopt(const ModelParams& params);
  /// The FIFO algorithms' α and β (ring, tree, FIFO one-shot: the slowest
  /// transport's, which across hosts is the link) as measured at init
  /// (comm/link_probe.cc); γ is kept. `how` joins origin().
  void setMeasuredLink(double alphaUs, double betaUsPerB, const std::string& how);
  /// Where the parameters came from: "built-in defaults", plus the file and
  /// COIL_TUNE when they applied (for the INFO log).
  const std::string& origin() const { return origin_; }
  /// True when `algorithm` implements `kind` and can run a call of `bytes`
  /// (the per-rank buffer) here: slice needs a window, one-shot a slot
  /// (window slot or FIFO slot) that holds the whole message; the rooted
  /// one-shot no window, a FIFO slot that holds its exchange, and at most
  /// algo::kRootedOneShotMaxSentBytes of payload sent per rank.
  bool available(algo::CollKind kind, Algo algorithm, size_t bytes) const;
  /// Predicted time of `algorithm` for a call moving `bytes` (the per-rank
  /// buffer; for all-gather/reduce-scatter/gather/scatter the per-rank
  /// block × n): the algorithm alone, without a rooted call's agreement.
  double predictUs(algo::CollKind kind, Algo algorithm, size_t bytes) const;
  /// What a call costs with `algorithm`: predictUs, plus, for a rooted
  /// collective whose algorithm is not the rooted one-shot, the agreement
  /// on the call that runs first (comm/call_agreement.cc). The tuner
  /// compares these.
  double callUs(algo::CollKind kind, Algo algorithm, size_t bytes) const;
  /// The agreement of a rooted call: one one-shot all-reduce of a record
  /// per rank where the one-shot can carry them, else a ring all-gather.
  bool agreementIsOneShot() const;
  double agreementUs() const;
  /// The chunk a FIFO algorithm uses for this call: whole slices, at most
  /// Topology::chunkBytes. The pipelined chains (broadcast ring, reduce)
  /// take the chunk that minimises (n-1 + S/C - 1)·(α + C·b), i.e.
  /// C = sqrt(S·α / ((n-2)·b)) with b = β (+ γ for reduce): small chunks fill
  /// a long chain sooner, large ones pay fewer hand-offs. Every other
  /// algorithm takes the largest chunk (its cost only falls as C grows).
  size_t chunkFor(algo::CollKind kind, Algo algorithm, size_t bytes) const;
  /// True when the one-shot runs through the window (else through FIFOs).
  bool oneShotUsesWindow() const { return topo_.windowSlotBytes != 0; }
  /// Slice all-reduce: bytes per piece, and the message size from which it
  /// writes its output with streaming stores.
  size_t slicePieceBytes() const { return p_.slicePieceBytes; }
  size_t streamFromBytes() const { return p_.streamFromBytes; }
  /// The FIFO programs (ring, tree, chain, ...) run on the caller-driven
  /// paths in pieces of this many bytes; 0: on the FIFOs. Where every rank
  /// has such paths to every peer, by default; their costs are then the
  /// transport's for them (transport::Traits::callerPath).
  size_t callerPieceBytes() const { return p_.callerPieceBytes; }
  /// Point-to-point messages on those paths go in pieces of this many
  /// bytes: the paths' largest message unless COIL_TUNE's caller= set one;
  /// 0: on the FIFOs. Not the programs' 256 KiB: with tcp's loopback-sized
  /// express buffer a 32 MiB sendrecv took 10.5-11.1 ms in 1 MiB pieces and
  /// 18-20 ms in 256 KiB ones, two runs in three slow at every size
  /// (docs/performance.md 4.3).
  size_t messagePieceBytes() const { return p_.messagePieceBytes; }
  /// True when a communicator with links of both kinds runs its FIFO
  /// programs' messages on the caller-driven paths where a link has one
  /// (Topology::mixedCallerPaths; COIL_TUNE's caller=0 turns it off).
  bool mixedCallerPaths() const { return p_.mixedCallerPaths != 0; }

 private:
  friend Choice choose(const Model&, algo::CollKind, size_t, const AlgorithmOverride&,
                       std::vector<Prediction>*);
  // The rooted one-shot (algorithms/rooted_oneshot_program.h): its
  // payload in bytes for a call the model sees as `bytes`, and its time.
  size_t rootedPayloadBytes(algo::CollKind kind, size_t bytes) const;
  double rootedOneShotUs(algo::CollKind kind, size_t bytes) const;
  void applyTuneFile(const std::string& path);
  void applyTuneEnv(const std::string& spec);
  // One TARGET with its key=value fields; `where` names the source in errors.
  void applyEntry(const std::string& target,
                  const std::vector<std::pair<std::string, std::string>>& fields,
                  const std::string& where);
  // The last choice (without predictions): a training loop or a benchmark
  // repeats the same size, and choose() then costs one comparison.
  struct LastChoice {
    bool valid = false;
    algo::CollKind kind{};
    size_t bytes = 0;
    Choice choice{};
  };
  mutable LastChoice last_;
  Topology topo_{};
  ModelParams p_{};
  algo::TreeLoad treeLoad_{};
  std::string origin_;
};

/// The algorithms coil has for a collective, in preference order for ties.
const std::vector<Algo>& algorithmsFor(algo::CollKind kind);

/// COIL_ALGO parsed once per communicator: "ring" (every collective that has
/// it) or "allreduce:tree,broadcast:ring". Throws coilInvalidUsage naming a
/// bad entry.
class AlgorithmOverride {
 public:
  explicit AlgorithmOverride(const std::string& spec = "");
  /// True and the forced algorithm for `kind`, or false for the model's choice.
  bool forced(algo::CollKind kind, Algo* algorithm) const;

 private:
  bool hasAll_ = false;
  Algo all_ = Algo::kRing;
  std::map<algo::CollKind, Algo> per_;
};

/// The forced algorithm if it is available for this call, else the available
/// one with the lowest prediction. `predictions` (optional, for INFO logs)
/// receives every available candidate's cost. `override` must be the same
/// object for every call on one model (its choice is cached).
Choice choose(const Model& model, algo::CollKind kind, size_t bytes,
              const AlgorithmOverride& override, std::vector<Prediction>* predictions);

}  // namespace coil::tune
