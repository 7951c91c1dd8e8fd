// Communicator: one rank's membership in a group of ranks.
//
// It owns the bootstrap, the transports, and one Connection per peer; it
// runs collectives by handing an algorithm (src/algorithms) an executor over
// those connections. Errors are coil::Error exceptions; src/api turns them
// into result codes.
//
// Fault model: any failure inside a collective (timeout, dead peer, mismatch)
// breaks the communicator: the error becomes sticky (asyncError), and every
// connection is closed so that the failure reaches every surviving rank
// instead of leaving them blocked.
//
// Connections live in a LinkSet (link_set.h), which a child made by
// coilCommSplit with splitShare=1 shares instead of connecting anew.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <chrono>
#include <vector>

#include "algorithms/call.h"
#include "algorithms/fifo_oneshot.h"
#include "algorithms/fingerprint.h"
#include "bootstrap/bootstrap.h"
#include "comm/link_set.h"
#include "comm/flight_recorder.h"
#include "comm/gpu_share.h"
#include "tune/spin_advisor.h"
#include "tune/tuner.h"
#include "core/deadline.h"
#include "core/error.h"
#include "coil.h"
#include "transports/transport.h"
#include "transports/window.h"

namespace coil {

/// One collective call as the API received it (counts as the API defines them:
/// sendcount for all-gather/gather, recvcount for reduce-scatter/scatter,
/// the per-peer count for all-to-all).
struct CollectiveCall {
  algo::CollKind kind;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  coilDataType_t type;
  coilRedOp_t op;  // coilSum for collectives without an op
  int root;        // 0 for collectives without a root
};

/// A point-to-point operation (coilSend / coilRecv).
struct P2pCall {
  bool isSend;
  void* buffer;
  size_t count;
  coilDataType_t type;
  int peer;
};

/// What coilCommSplit tells one rank.
struct SplitPlan {
  bool member = false;  // false for COIL_SPLIT_NOCOLOR
  UniqueIdData id{};
  int rank = -1;
  int nranks = 0;
  // Parent rank of each child rank (the members, in child rank order).
  std::vector<int> parentRanks;
};

struct CommOptions {
  int64_t timeoutMs = 30 * 60 * 1000;  // every wait's deadline
  std::string name;                    // label for logs
  int splitShare = -1;                 // coilConfig_t.splitShare; -1: not set
  std::string transport;               // coilConfig_t.netName as a transport; empty: not set
  // The GPU of this rank's stream calls (device::uuidOf); none: no device.
  std::optional<std::array<uint8_t, 16>> gpuUuid;
};

/// The parent ranks that remain after excluding `excluded`, in order.
std::vector<int> shrinkMembers(int nranks, const std::vector<int>& excluded);

/// The timeout a communicator uses: config value if > 0, else
/// COIL_TIMEOUT_MS, else 30 minutes (torch's default).
int64_t resolveTimeoutMs(int64_t configured);

class Communicator {
 public:
  /// Collective: joins the rendezvous `id` as `rank` of `nranks` and connects
  /// to every peer, or with `share` non-empty uses those links instead (a
  /// child of coilCommSplit with splitShare=1; every rank must pass one).
  /// `abortFlag` (owned by the caller, outlives this object) ends every wait
  /// when set.
  Communicator(const UniqueIdData& id, int nranks, int rank, const CommOptions& options,
               const std::atomic<bool>* abortFlag, SharedLinks share = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  /// True when another rank of this communicator is a thread of this
  /// process on the same GPU: their streams share the GPU's hardware queues
  /// (device/staged_stream.h says why that matters).
  bool sharesGpuInProcess() const { return sharesGpuInProcess_; }
  /// True when every rank has a GPU and all are on this host (the same on
  /// every rank): device memory can then be mapped between them.
  bool allOnOneHostWithGpus() const { return allOnOneHostWithGpus_; }
  /// How the ranks spread over processes (gpu_share.h); the same on every rank.
  ProcessSpread processSpread() const { return processSpread_; }
  /// The transport of this rank's link to `peer` and why it was chosen
  /// ({"tcp", "not shm: another host"}); {"self", ""} for this rank.
  std::pair<std::string, std::string> linkReport(int peer) const;
  /// coilSuccess, or the error that broke this communicator.
  coilResult_t asyncError() const { return asyncError_.load(); }

  /// Runs a collective (arguments already validated by the API layer).
  void collective(const CollectiveCall& call);
  /// An all-gather of `bytes` per rank over the bootstrap, not the links:
  /// for exchanges that set things up (the device windows made at init, and
  /// agreeing on registered ones). A non-blocking child of a split with
  /// splitShare=1 sets up while its parent may run operations on the links
  /// they share, and a collective of its own there would collide with them.
  /// Within the communicator's timeout.
  void allGatherAtSetup(void* all, size_t bytes);
  /// Which path a point-to-point message takes to its peer: the fastest
  /// it has (a caller-driven path where its connection has one), or the
  /// one the collectives take to it (the FIFOs unless every rank has
  /// caller-driven paths to every peer): the link probe times that one.
  enum class P2pPath { kFastest, kCollectives };
  /// Runs point-to-point operations concurrently: they complete in any
  /// order, so no send/recv pattern among them can deadlock. A single call
  /// outside a group is a batch of one.
  void pointToPoint(const std::vector<P2pCall>& calls, P2pPath path = P2pPath::kFastest);
  /// coilCommRegister / coilCommDeregister: every link with a zero-copy
  /// path (transports/direct_io.h) registers the range; the handle says
  /// which. Deregistering an unknown handle is coilInvalidArgument.
  void* registerBuffer(void* buffer, size_t bytes);
  void deregisterBuffer(void* handle);
  /// Collective: returns once every rank has called it.
  void barrier();
  /// coilGroupSimulateEnd: the cost model's time in µs for `call` with the
  /// algorithm it would choose (COIL_ALGO respected), or for a batch of
  /// point-to-point operations run together. Local; runs nothing.
  double estimateUs(const CollectiveCall& call) const;
  double estimateUs(const std::vector<P2pCall>& calls) const;
  /// Collective over this communicator: decides the child communicator of
  /// this rank (the leader of each color hosts the child's rendezvous).
  /// `share`: this rank's splitShare; the ranks of one color must agree
  /// (coilInvalidUsage otherwise, without breaking this communicator).
  SplitPlan planSplit(int color, int key, bool share);
  /// coilCommShrink with a healthy parent (shrink.cc): collective over the
  /// ranks not in `excluded` (valid, distinct parent ranks, not this one);
  /// the lowest remaining rank hosts the child's rendezvous and sends its
  /// id to the others over this communicator's connections.
  SplitPlan planShrink(const std::vector<int>& excluded);
  /// coilCommShrink with COIL_SHRINK_ABORT, on a communicator the caller
  /// has closed (closeAll): local, no message; every remaining rank derives
  /// the same rendezvous, hosted by the lowest of them (shrink.cc).
  SplitPlan planShrinkAfterAbort(const std::vector<int>& excluded);
  /// The links a child of `plan` borrows (splitShare=1); from now on this
  /// communicator's operations claim their links (link_set.h).
  SharedLinks sharedLinksFor(const SplitPlan& plan) const;
  const CommOptions& options() const { return options_; }

  /// coilRedOpCreatePreMulSum / coilRedOpDestroy.
  coilRedOp_t createPreMulSum(const void* scalar, coilDataType_t type, bool hostImmediate);
  void destroyOp(coilRedOp_t op);
  /// A built-in op, or a pre-multiplied sum created on this communicator
  /// for exactly this datatype.
  bool validOp(int op, coilDataType_t type) const;
  /// Breaks the communicator: closes every connection so blocked peers fail.
  /// Thread-safe; the abort flag itself is set by the owner.
  void closeAll() noexcept;
  /// Waits, until `until` at most, for everything published on the send
  /// FIFOs to leave this process (transport::Connection::sent: tcp's proxy
  /// has written it to the socket). The ranks it still has data queued for.
  /// Thread-safe: reads the FIFOs' counters only (api/exit_flush.h).
  std::vector<int> waitUntilSent(std::chrono::steady_clock::time_point until) noexcept;

 private:
  void connectPeers(const Deadline& deadline, SharedLinks share);
  void borrowLinks(SharedLinks share);
  // Claims every link of this communicator for one operation when the links
  // are shared (link_set.h); a no-op otherwise. Released on destruction.
  class LinkClaim {
   public:
    explicit LinkClaim(Communicator& comm);
    ~LinkClaim();
    LinkClaim(const LinkClaim&) = delete;
    LinkClaim& operator=(const LinkClaim&) = delete;

   private:
    void release() noexcept;
    Communicator& comm_;
    int claimed_ = 0;  // ranks [0, claimed_) hold a claim (where they have a link)
  };
  void openWindow(const std::vector<transport::PeerInfo>& infos, const Deadline& deadline);
  /// One exchange at init: sliceBytes_, slicesPerChunk_ and callerIoBytes_,
  /// the smallest over the ranks. Collective.
  void agreeOnSlices();
  /// Rank 0 and the first rank of another host time their link; every rank
  /// then adopts the α and β rank 0 derived (link_probe.cc). Collective.
  void probeLinkAcrossHosts();
  /// Where the FIFO one-shot's messages go (fifo_oneshot.h): COIL_TUNE's
  /// caller=0 keeps them on the FIFOs in a communicator of both kinds.
  algo::OneShotPaths oneShotPaths() const {
    return {callerIoBytes_, model_.mixedCallerPaths() ? mixedExpressBytes_ : 0};
  }
  /// A child on its parent's links: the parent's measurement of the link
  /// across hosts, if it made one (link_probe.cc).
  void adoptParentsLink();
  [[noreturn]] void breakWith(const Error& e);
  // Sends `message` as a failure notice to every peer whose FIFO has room
  // (failure_notice.h), and waits up to 100 ms for tcp to send them.
  void noticePeers(const std::string& message) noexcept;
  void checkUsable() const;
  // This process called coilCommRevoke or coilCommAbort on the communicator.
  bool revokedOrAborted() const { return abortFlag_ && abortFlag_->load(std::memory_order_relaxed); }
  const transport::Traits& slowestTraits() const;
  void runScheduled(const CollectiveCall& call, uint32_t seq, const Deadline& deadline);
  // The fingerprint of a rooted call's agreement step, and the step itself
  // (call_agreement.cc): every rank fails if any rank is in another call.
  uint64_t agreementTag(algo::CollKind kind, uint32_t seq) const;
  void agreeOnCall(const algo::Call& call, uint64_t agreementTag);
  // A record of the call, as the agreement exchanges it
  // (algo::kCallRecordBytes at `at`), and the check of all n records (rank
  // q's at records + 24·q): fails naming both calls when one differs from
  // this rank's.
  static void writeCallRecord(const algo::Call& call, uint8_t* at);
  void checkCallRecords(const algo::Call& call, const uint8_t* records) const;
  // The rooted one-shot: the agreement and a small rooted call in one
  // one-shot, where the tuner (or COIL_ALGO) chose "oneshot" for it
  // (fused_rooted_call.cc, algorithms/rooted_oneshot_program.h).
  void runRootedOneShot(const algo::Call& call, uint64_t agreementTag);
  bool runDirect(const algo::Call& call, tune::Algo algorithm);
  // The piece a point-to-point message to the peer of `conn` moves in on
  // its caller-driven path, taking `path`; 0: it moves through the FIFOs
  // (p2p_task.h). The same at both ends of a pair.
  size_t callerPieceBytes(transport::Connection& conn, P2pPath path) const;

  struct PreMulSum {
    coilDataType_t type;
    const void* scalarPtr;           // coilScalarDevice: read at call time
    std::vector<uint8_t> immediate;  // coilScalarHostImmediate
  };

  int rank_;
  int nranks_;
  CommOptions options_;
  const std::atomic<bool>* abortFlag_;
  std::string label_;
  std::unique_ptr<Bootstrap> bootstrap_;
  LinkLease links_;                            // transports and connections
  bool borrowsLinks_ = false;                  // links_ is a parent's (splitShare=1)
  std::vector<int> linkOf_;                    // by rank: index in links_; -1 for self
  std::vector<transport::Connection*> peers_;  // by rank; nullptr for self
  std::vector<int> hostOfRank_;                // by rank: its host, dense (0 = rank 0's)
  bool sharesGpuInProcess_ = false;
  bool allOnOneHostWithGpus_ = false;
  ProcessSpread processSpread_;
  std::vector<std::string> linkReason_;        // by rank: why its link's transport (linkReport)
  struct Registration {
    void* buffer;
    size_t bytes;
    std::vector<transport::DirectIo*> paths;  // each registered the range once
  };
  std::vector<std::unique_ptr<Registration>> registrations_;
  const uint64_t id_;                          // process-unique, names link claims
  // Added to the sequence number in every fingerprint. Zero unless the links
  // are borrowed: then the parent's calls and this one's cannot carry the
  // same fingerprint, and slots of one read by the other fail as mismatches.
  uint32_t seqSalt_ = 0;
  // All ranks on this host: the shared scratch of the window algorithms
  // (transports/window.h); nullptr otherwise.
  std::unique_ptr<transport::Window> window_;
  size_t sliceBytes_ = 0;
  // The largest message of the caller-driven paths (transports/caller_io.h)
  // that every rank has to every peer, agreed at init; 0 where any rank has
  // a peer without one. The one-shot and the FIFO programs run there only
  // then: a rank must never send where its peer does not read.
  size_t callerIoBytes_ = 0;
  size_t mixedExpressBytes_ = 0;  // links of both kinds: the largest message every link that
                                  // has a caller-driven path carries; 0 otherwise (agreeOnSlices)
  size_t slicesPerChunk_ = 1;
  uint32_t seq_ = 0;
  std::vector<uint32_t> sendSeq_, recvSeq_;  // point-to-point, per peer
  std::vector<uint64_t> fusedScratch_;       // runRootedOneShot's exchange,
  std::vector<const void*> fusedBlocks_;     // and a reduce's blocks in it
  // The last COIL_FLIGHT_RECORDER_ENTRIES operations; dumped by breakWith.
  FlightRecorder flight_;
  tune::AlgorithmOverride algoOverride_;
  tune::Model model_;
  int maxSpinUs_ = 0;        // COIL_SPIN_US: longest pause-poll before a wait sleeps
  tune::SpinAdvisor spin_;   // how to wait, learned per message size
  ReusedDeadline deadline_;  // of collective and point-to-point calls
  std::map<int, PreMulSum> preMulOps_;
  std::vector<uint8_t> reduceScratch_;  // tree reduce: accumulation on non-root ranks
  int nextOp_ = coilNumOps;
  uint32_t abortShrinks_ = 0;  // planShrinkAfterAbort calls: each derives another rendezvous
  std::atomic<coilResult_t> asyncError_{coilSuccess};
  std::mutex closeMutex_;
  bool closed_ = false;
};

}  // namespace coil
