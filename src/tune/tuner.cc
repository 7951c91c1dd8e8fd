#include "tune/tuner.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "algorithms/registry.h"
#include "algorithms/rooted_oneshot_program.h"
#include "core/env.h"
#include "tune/cost_formulas.h"
#include "core/error.h"

namespace coil::tune {
namespace {

using algo::CollKind;

// Default parameters, fitted to coil_perf medians (2 ranks, float32 sum) on
// the 2-core reference machine, 2026-11-21 (docs/performance.md has the
// measurements). β and γ are µs per byte, so 1/6000 is 6 GB/s.
//
// The FIFO algorithms' costs are the slowest transport's own
// (transport::Traits, transports/*/): the tuner never names a transport.
// Window one-shot: one flag handshake (~0.2 µs between two cores; up to
// 1908 bytes travel in the flag's lines, beyond that the data is one more
// transfer after the flag). Per byte it is dear: every rank pulls every
// other rank's whole input across the caches (β: copy in, γ: each reduced
// byte with its remote read). Fitted to 2 ranks, 512 B - 4 KiB, measured
// interleaved with slice: 0.33, 0.50, 0.75, 1.20 µs.
constexpr Cost kWindowOneShot{0.21, 1.0 / 10000.0, 1.0 / 7000.0, 1.0};
// Window slice: two handshakes per piece, each rank pulls and reduces only
// 1/n: measured 0.44, 0.47, 0.62, 0.89 µs at the same sizes, 12 µs at
// 64 KiB, 103 µs at 1 MiB; from 4 MiB on its streaming stores keep the
// per-byte cost the same beyond the caches (1229 µs at 8 MiB). With these,
// 2 ranks run one-shot up to ~1.5 KB (measured: a tie at 1 KiB), slice up
// to ~768 KiB, the ring up to 4 MiB, slice beyond; 8 ranks switch from
// one-shot at ~200 bytes.
constexpr Cost kWindowSlice{0.19, 1.0 / 16700.0, 1.0 / 13900.0, 1.0};

// More ranks than cores (8 ranks on 2 cores in CI): a window handshake
// needs every rank to run once; with waits that yield the core to each
// other (tune/spin_advisor.h) that is ~1.6 µs per rank (8 ranks: a one-shot
// in ~14 µs). A FIFO step waits on a futex: ~9 µs for the receiver's
// wake-up. And every byte is moved by n/cores times fewer cores.
constexpr double kWindowSwitchUsPerRank = 1.6;
constexpr double kFifoWakeUs = 9.0;
// Pieces of one whole 1 MiB window slot: measured faster than 128 KiB and
// 256 KiB pieces (fewer handshakes; the slots live in the shared L3).
// From 4 MiB on, two ranks' inputs, outputs and slots no longer fit the
// 32 MiB last-level cache, and streaming stores save the read-for-ownership
// of every output line (measured: 23% less CPU time per call at 16 MiB).
constexpr size_t kSlicePieceBytes = 1 << 20;
constexpr size_t kStreamFromBytes = 4 << 20;
// The FIFO programs' piece on a caller-driven path (point-to-point keeps
// the path's largest message, see messagePieceBytes): one message per
// piece, written from where the data lies. 256 KiB,
// a quarter of tcp's largest express message: a piece that fits TCP's
// initial window (ten 64 KiB loopback segments) leaves in the write that
// made it. Under a pacing congestion control (BBR) larger ones arrived out
// of order (sent partly later, we think, from a timer on another CPU), and
// the retransmissions halved the ring (2.0-2.9 GB/s with 1 MiB pieces,
// 3.8-5.0 with 256 KiB, 2 ranks, 2026-12-07; docs/performance.md 4.3).
// Without pacing 256 KiB and 1 MiB were as fast within the noise. Since
// the express socket's loopback-sized send buffer (tcp_express.h) the
// 1 MiB piece is still the slower: 32 MiB took 15.2-16.1 ms against
// 12.3-12.8 ms, 2 MiB 776-853 µs against 622-694 µs.
constexpr size_t kCallerPieceBytes = 256 << 10;
// The buffers outgrow the last-level cache when n ranks' inputs and
// outputs (2·n·S) pass half of it: S > L3 / (4n), 4 MiB for 2 ranks here.
constexpr size_t kAssumedCacheBytes = 8 << 20;

const std::map<std::string, Algo>& algoNames() {
  static const std::map<std::string, Algo> names = {
      {"ring", Algo::kRing},       {"tree", Algo::kTree},         {"oneshot", Algo::kOneShot},
      {"slice", Algo::kSlice},     {"chain", Algo::kChain},       {"pairwise", Algo::kPairwise},
      {"direct", Algo::kDirect},   {"hier", Algo::kHier}};
  return names;
}

CollKind kindOf(const std::string& name) {
  CollKind kind;
  if (!algo::parseCollective(name, &kind) || kind == CollKind::Barrier)
    fail(coilInvalidUsage, "COIL_ALGO: unknown collective '", name, "'");
  return kind;
}

bool has(CollKind kind, Algo algorithm) {
  for (Algo a : algorithmsFor(kind))
    if (a == algorithm) return true;
  return false;
}

}  // namespace

bool parseAlgo(const std::string& name, Algo* out) {
  auto it = algoNames().find(name);
  if (it == algoNames().end()) return false;
  *out = it->second;
  return true;
}

const char* algoName(Algo a) {
  switch (a) {
    case Algo::kRing: return "ring";
    case Algo::kTree: return "tree";
    case Algo::kOneShot: return "oneshot";
    case Algo::kSlice: return "slice";
    case Algo::kChain: return "chain";
    case Algo::kPairwise: return "pairwise";
    case Algo::kDirect: return "direct";
    case Algo::kHier: return "hier";
  }
  return "?";
}

Model::Model(const Topology& topology) : topo_(topology) {
  p_.ring = p_.tree = topo_.fifo;
  p_.local = topo_.local;
  p_.fifoOneShot = topo_.oneShot;
  p_.windowOneShot = kWindowOneShot;
  p_.slice = kWindowSlice;
  p_.lineTransferUs = kWindowOneShot.alphaUs;
  p_.slicePieceBytes = kSlicePieceBytes;
  p_.streamFromBytes = kStreamFromBytes;
  p_.cacheBytes = topo_.cacheBytes != 0 ? topo_.cacheBytes : kAssumedCacheBytes;
  // Where every peer has a caller-driven path, the FIFO programs run on it
  // (no helper thread, no slot copies), at the costs the transport states
  // for it; so do their messages across hosts where the links inside a
  // host are FIFOs.
  p_.callerPieceBytes = std::min<uint64_t>(topo_.callerPieceBytes, kCallerPieceBytes);
  p_.messagePieceBytes = topo_.callerPieceBytes;
  p_.mixedCallerPaths = topo_.mixedCallerPaths ? 1 : 0;
  if (p_.callerPieceBytes != 0 || p_.mixedCallerPaths) p_.ring = p_.tree = topo_.callerPath;
  origin_ = "built-in defaults";
  if (auto path = env::get("COIL_TUNE_FILE"); topo_.userTuning && path && !path->empty())
    applyTuneFile(*path);
  // Oversubscription scales whatever the parameters describe (one rank per
  // core): the ranks of the fullest host against the CPUs of a host.
  const int ranksPerHost = topo_.hosts > 1 ? topo_.largestHost : topo_.nranks;
  if (topo_.cores > 0 && ranksPerHost > topo_.cores) {
    const double share = static_cast<double>(ranksPerHost) / topo_.cores;
    for (Cost* c : {&p_.ring, &p_.tree, &p_.fifoOneShot, &p_.windowOneShot, &p_.slice, &p_.local}) {
      c->alphaUs += c == &p_.windowOneShot || c == &p_.slice ? kWindowSwitchUsPerRank * ranksPerHost
                                                             : kFifoWakeUs;
      c->betaUsPerB *= share;
      c->gammaUsPerB *= share;
    }
  }
  if (auto spec = env::get("COIL_TUNE"); topo_.userTuning && spec && !spec->empty())
    applyTuneEnv(*spec);
  treeLoad_ = algo::doubleTreeLoad(topo_.nranks);
  // Across hosts the built-in tcp costs are loopback's, not the link's:
  // measure the link at init unless the user gave parameters or said no.
  const std::string probe = env::get("COIL_LINK_PROBE").value_or("1");
  if (probe != "0" && probe != "1")
    fail(coilInvalidUsage, "COIL_LINK_PROBE=", probe, ": expected 0 or 1");
  p_.probeLink = topo_.hosts >= 2 && origin_ == "built-in defaults" && probe == "1";
}

void Model::setMeasuredLink(double alphaUs, double betaUsPerB, const std::string& how) {
  for (Cost* c : {&p_.ring, &p_.tree, &p_.fifoOneShot}) {
    c->alphaUs = alphaUs;
    c->betaUsPerB = betaUsPerB;
  }
  // On the caller-driven paths a program's step is about two hops
  // (transport::Traits::callerPath).
  if (p_.callerPieceBytes != 0 || p_.mixedCallerPaths) p_.ring.alphaUs = p_.tree.alphaUs = 2 * alphaUs;
  origin_ += " + " + how;
  last_ = {};
}

void Model::adopt(const ModelParams& params) {
  p_ = params;
  last_ = {};
}

namespace {

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

}  // namespace

// A calibration file: "TARGET key=value key=value" per line, "#" comments.
void Model::applyTuneFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(coilInvalidUsage, "COIL_TUNE_FILE=", path, ": cannot open: ", std::strerror(errno));
  std::string line;
  bool used = false;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string target, word;
    words >> target;
    std::vector<std::pair<std::string, std::string>> fields;
    while (words >> word) {
      auto eq = word.find('=');
      fields.emplace_back(word.substr(0, eq), eq == std::string::npos ? "" : word.substr(eq + 1));
    }
    const std::string where = "COIL_TUNE_FILE=" + path + " line " + std::to_string(number);
    applyEntry(target, fields, where);
    const std::string transport = target.substr(0, target.find('/'));
    used = used || transport == topo_.transport || (transport == "window" && topo_.windowSlotBytes);
  }
  if (in.bad()) fail(coilInvalidUsage, "COIL_TUNE_FILE=", path, ": read error");
  if (used) origin_ = "COIL_TUNE_FILE=" + path;
}

// COIL_TUNE="tcp:alpha=20,beta=0.0005;window/slice:piece=262144".
void Model::applyTuneEnv(const std::string& spec) {
  std::stringstream entries(spec);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    if (entry.empty()) continue;
    auto colon = entry.find(':');
    if (colon == std::string::npos)
      fail(coilInvalidUsage, "COIL_TUNE: expected TRANSPORT[/ALGORITHM]:key=value,..., got '",
           entry, "'");
    std::vector<std::pair<std::string, std::string>> fields;
    std::stringstream list(entry.substr(colon + 1));
    std::string field;
    while (std::getline(list, field, ',')) {
      auto eq = field.find('=');
      if (eq == std::string::npos) fail(coilInvalidUsage, "COIL_TUNE: bad field '", field, "'");
      fields.emplace_back(field.substr(0, eq), field.substr(eq + 1));
    }
    applyEntry(entry.substr(0, colon), fields, "COIL_TUNE entry '" + entry + "'");
  }
  origin_ += " + COIL_TUNE";
}

void Model::applyEntry(const std::string& target,
                       const std::vector<std::pair<std::string, std::string>>& fields,
                       const std::string& where) {
  std::string transport = target, algorithm;
  if (auto slash = target.find('/'); slash != std::string::npos) {
    transport = target.substr(0, slash);
    algorithm = target.substr(slash + 1);
  }
  const auto& known = topo_.transports;
  if (transport != "window" && std::find(known.begin(), known.end(), transport) == known.end()) {
    std::string list;
    for (const auto& name : known) list += name + ", ";
    fail(coilInvalidUsage, where, ": unknown transport '", transport, "' (", list, "window)");
  }
  Algo a = Algo::kRing;
  if (!algorithm.empty() && !parseAlgo(algorithm, &a))
    fail(coilInvalidUsage, where, ": unknown algorithm '", algorithm, "'");
  std::vector<Cost*> costs;
  if (transport == "window") {
    if (algorithm.empty() || a == Algo::kOneShot) costs.push_back(&p_.windowOneShot);
    if (algorithm.empty() || a == Algo::kSlice) costs.push_back(&p_.slice);
    if (!algorithm.empty() && costs.empty())
      fail(coilInvalidUsage, where, ": the window runs oneshot and slice, not '", algorithm, "'");
  } else if (transport == topo_.transport) {
    if (algorithm.empty() || a == Algo::kRing) costs.push_back(&p_.ring);
    if (algorithm.empty() || a == Algo::kTree) costs.push_back(&p_.tree);
    if (algorithm.empty() || a == Algo::kOneShot) costs.push_back(&p_.fifoOneShot);
  }
  for (const auto& [key, text] : fields) {
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(value >= 0))
      fail(coilInvalidUsage, where, ": '", key, "=", text, "' needs a non-negative number");
    if (key == "caller") {
      if (transport == "window" || !algorithm.empty())
        fail(coilInvalidUsage, where, ": caller= belongs to a transport alone (",
             topo_.transport, ":caller=BYTES)");
      if (transport != topo_.transport) continue;
      if (value != 0 && (topo_.callerPieceBytes == 0 || value > topo_.callerPieceBytes))
        fail(coilInvalidUsage, where, ": caller=", text, ": the caller-driven paths here carry ",
             topo_.callerPieceBytes == 0 ? "nothing (a peer has none)"
                                         : "at most " + std::to_string(topo_.callerPieceBytes) + " bytes");
      // Off, the programs' costs are the FIFOs' again (as the transport
      // states them: entries before this one and oversubscription's
      // scaling do not carry over).
      p_.callerPieceBytes = p_.messagePieceBytes = static_cast<uint64_t>(value);
      if (p_.callerPieceBytes == 0) {
        p_.mixedCallerPaths = 0;
        p_.ring = p_.tree = topo_.fifo;
      }
      continue;
    }
    if (key == "piece" || key == "stream") {
      if (!(transport == "window" && a == Algo::kSlice && !algorithm.empty()))
        fail(coilInvalidUsage, where, ": ", key, "= belongs to window/slice");
      (key == "piece" ? p_.slicePieceBytes : p_.streamFromBytes) = static_cast<uint64_t>(value);
      continue;
    }
    double Cost::*member = key == "alpha" || key == "alpha_us"                ? &Cost::alphaUs
                           : key == "beta" || key == "beta_us_per_byte"       ? &Cost::betaUsPerB
                           : key == "gamma" || key == "gamma_us_per_byte"     ? &Cost::gammaUsPerB
                           : key == "memory" || key == "memory_factor"        ? &Cost::memoryFactor
                                                                             : nullptr;
    if (member == nullptr)
      fail(coilInvalidUsage, where, ": unknown parameter '", key,
           "' (alpha, beta, gamma, memory; caller for a transport; piece, stream for window/slice)");
    for (Cost* c : costs) c->*member = value;
  }
}

const Cost& Model::cost(Algo algorithm) const {
  switch (algorithm) {
    case Algo::kTree: return p_.tree;
    case Algo::kOneShot: return oneShotUsesWindow() ? p_.windowOneShot : p_.fifoOneShot;
    case Algo::kSlice: return p_.slice;
    default: return p_.ring;
  }
}

const std::vector<Algo>& algorithmsFor(CollKind kind) {
  // A switch, not a map: this runs on every call.
  static const std::vector<Algo> allReduce{Algo::kRing, Algo::kTree, Algo::kOneShot, Algo::kSlice,
                                           Algo::kHier};
  // The rooted collectives' "oneshot" is the rooted one-shot
  // (algorithms/rooted_oneshot_program.h).
  static const std::vector<Algo> broadcast{Algo::kRing, Algo::kTree, Algo::kHier, Algo::kOneShot};
  static const std::vector<Algo> reduce{Algo::kChain, Algo::kTree, Algo::kHier, Algo::kOneShot};
  static const std::vector<Algo> directOneShot{Algo::kDirect, Algo::kOneShot};
  static const std::vector<Algo> pairwise{Algo::kPairwise}, direct{Algo::kDirect};
  static const std::vector<Algo> barrier{Algo::kRing, Algo::kOneShot};
  static const std::vector<Algo> ringHier{Algo::kRing, Algo::kHier};
  switch (kind) {
    case CollKind::AllReduce: return allReduce;
    case CollKind::Broadcast: return broadcast;
    case CollKind::Reduce: return reduce;
    case CollKind::AllGather:
    case CollKind::ReduceScatter: return ringHier;
    case CollKind::AllToAll: return pairwise;
    case CollKind::Barrier: return barrier;
    case CollKind::Gather:
    case CollKind::Scatter: return directOneShot;
    case CollKind::SendRecv:
    case CollKind::FailureNotice: return direct;
  }
  return direct;
}

bool Model::available(CollKind kind, Algo algorithm, size_t bytes) const {
  if (!has(kind, algorithm)) return false;
  switch (algorithm) {
    case Algo::kSlice: return topo_.windowSlotBytes != 0;
    // Across hosts, with a host that has ranks to share the work (with one
    // rank per host it would be the flat ring over the hosts).
    case Algo::kHier: return topo_.hosts >= 2 && topo_.largestHost >= 2;
    case Algo::kOneShot:
      if (topo_.nranks < 2) return false;
      if (algo::hasRoot(kind)) {
        // The rooted one-shot: not with a shared window (its agreement costs
        // under a microsecond there), and only while the bytes each rank
        // sends stay within what was measured to pay (rooted_oneshot_program.h).
        const size_t payload = rootedPayloadBytes(kind, bytes);
        return !oneShotUsesWindow() &&
               algo::rootedOneShotWithinCap(topo_.nranks, payload) &&
               algo::rootedExchangeBytes(topo_.nranks, payload) <= topo_.fifoSlotBytes;
      }
      return bytes <= (oneShotUsesWindow() ? topo_.windowSlotBytes : topo_.fifoSlotBytes);
    default: return true;
  }
}

// The α, β, γ of `algorithm` for a call of `bytes`, beyond the cache scaled.
static Cost effectiveCost(const Cost& m, uint64_t cacheBytes, int nranks, size_t bytes) {
  return memoryScaled(m, cacheBytes, nranks, static_cast<double>(bytes));
}

size_t Model::chunkFor(CollKind kind, Algo a, size_t bytes) const {
  const size_t largest =
      std::max<size_t>(1, p_.callerPieceBytes != 0 ? p_.callerPieceBytes : topo_.chunkBytes);
  const bool chain = (kind == CollKind::Broadcast && (a == Algo::kRing || a == Algo::kHier)) ||
                     (kind == CollKind::Reduce && (a == Algo::kChain || a == Algo::kHier));
  if (!chain || topo_.nranks < 3 || topo_.sliceBytes == 0 || topo_.sliceBytes >= largest)
    return largest;
  const Cost m = effectiveCost(cost(a), p_.cacheBytes, topo_.nranks, bytes);
  const double perByte = m.betaUsPerB + (kind == CollKind::Reduce ? m.gammaUsPerB : 0.0);
  if (!(perByte > 0)) return largest;
  const double best = std::sqrt(static_cast<double>(bytes) * m.alphaUs / ((topo_.nranks - 2) * perByte));
  const size_t slices = static_cast<size_t>(std::llround(best / static_cast<double>(topo_.sliceBytes)));
  return std::clamp<size_t>(slices, 1, largest / topo_.sliceBytes) * topo_.sliceBytes;
}

double Model::predictUs(CollKind kind, Algo a, size_t bytes) const {
  const double S = static_cast<double>(bytes), N = topo_.nranks;
  const double C = static_cast<double>(chunkFor(kind, a, bytes));
  if (topo_.nranks == 1) return S * cost(a).betaUsPerB;  // a local copy
  const Cost m = effectiveCost(cost(a), p_.cacheBytes, topo_.nranks, bytes);
  const double f = (N - 1) / N;
  switch (kind) {
    case CollKind::AllReduce:
    case CollKind::Barrier:
      switch (a) {
        case Algo::kRing: return ringAllReduceUs(m, topo_.nranks, S, C);
        case Algo::kTree: return treeAllReduceUs(m, treeLoad_, S, C);
        case Algo::kOneShot:
          // Window: copy in once, then reduce all n inputs; beyond the inline
          // lines the data follows its flag (one more transfer, ~α). FIFOs:
          // the whole input goes to each of the n-1 peers over this rank's link.
          if (oneShotUsesWindow())
            return m.alphaUs + (bytes > topo_.windowInlineBytes ? p_.lineTransferUs : 0.0) +
                   S * m.betaUsPerB + (N - 1) * S * m.gammaUsPerB;
          return m.alphaUs + (N - 1) * S * m.betaUsPerB + (N - 1) * S * m.gammaUsPerB;
        case Algo::kHier: {
          // hierarchical.cc: a ring of the H hosts per part (the K rails
          // share each host's link, so together they move 2(H-1)/H·S over
          // it), and two chains of the L ranks inside each host per part.
          // Inside: each rank forwards every part but its own once per chain.
          const double H = topo_.hosts, K = topo_.smallestHost, L = topo_.largestHost;
          const Cost l = effectiveCost(p_.local, p_.cacheBytes, topo_.nranks, bytes);
          const double rounds = std::max(1.0, std::ceil(S / (K * H * C)));
          const double across = 2 * (H - 1) * rounds * m.alphaUs + 2 * (H - 1) / H * S * m.betaUsPerB +
                                (H - 1) / H * S * m.gammaUsPerB;
          const double fl = (L - 1) / L;
          const double inside = 2 * (K * (L - 1) + std::ceil(S / C)) * l.alphaUs +
                                2 * fl * S * l.betaUsPerB + fl * S * l.gammaUsPerB;
          return across + inside;
        }
        case Algo::kSlice: {
          // Two handshakes per piece; (n-1)/n·S copied in, S/n + (n-1)/n·S
          // copied out, (n-1)/n·S reduced.
          double pieces = std::max(1.0, std::ceil(S / static_cast<double>(std::max<uint64_t>(1, p_.slicePieceBytes))));
          return 2 * pieces * m.alphaUs + (2 * N - 1) / N * S * m.betaUsPerB + f * S * m.gammaUsPerB;
        }
        default: break;
      }
      break;
    case CollKind::Broadcast:
    case CollKind::Reduce: {
      if (a == Algo::kOneShot) return rootedOneShotUs(kind, bytes);
      const double chunks = std::max(1.0, std::ceil(S / C));
      const double chunk = std::min(S, C);  // what one hop of a chain moves
      const bool reduces = kind == CollKind::Reduce;
      const double perByte = m.betaUsPerB + (reduces ? m.gammaUsPerB : 0.0);
      if (a == Algo::kTree)  // a parent sends (broadcast) or takes in (reduce) two chunks a step
        return (treeLoad_.depth + chunks) * m.alphaUs + 2 * S * perByte;
      const double hop = m.alphaUs + chunk * perByte;
      if (a == Algo::kHier) {
        // hierarchical.cc: H - 1 hops of the chain cross hosts, n - H stay
        // inside one; the chunks after the first stream at the link's pace.
        const Cost l = effectiveCost(p_.local, p_.cacheBytes, topo_.nranks, bytes);
        const double H = topo_.hosts;
        const double localHop =
            l.alphaUs + chunk * (l.betaUsPerB + (reduces ? l.gammaUsPerB : 0.0));
        return (H - 1 + chunks - 1) * hop + (N - H) * localHop;
      }
      return (N - 1 + chunks - 1) * hop;  // the chain in rank order
    }
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
      if (a == Algo::kHier)
        return hierGatherUs(m, effectiveCost(p_.local, p_.cacheBytes, topo_.nranks, bytes),
                            topo_.nranks, topo_.hosts, topo_.smallestHost, topo_.largestHost, S,
                            kind == CollKind::ReduceScatter);
      return ringGatherUs(m, topo_.nranks, S, kind == CollKind::ReduceScatter);
    default:  // all-to-all, gather, scatter, send/recv: (n-1) blocks of S/n
      if (a == Algo::kOneShot && algo::hasRoot(kind)) return rootedOneShotUs(kind, bytes);
      return (N - 1) * m.alphaUs + f * S * m.betaUsPerB;
  }
  return 1e30;
}

size_t Model::rootedPayloadBytes(CollKind kind, size_t bytes) const {
  // The model's bytes are the buffer (broadcast, reduce) or all n blocks
  // (gather, scatter: comm/model_bytes.h); a reduce's payload holds n blocks.
  return kind == CollKind::Reduce ? static_cast<size_t>(topo_.nranks) * bytes : bytes;
}

double Model::rootedOneShotUs(CollKind kind, size_t bytes) const {
  // The FIFO one-shot of the exchange (records and payload, summed as whole
  // words), then a reduce's root reduces the payload's n blocks of S.
  const size_t exchange = algo::rootedExchangeBytes(topo_.nranks, rootedPayloadBytes(kind, bytes));
  const Cost m = effectiveCost(p_.fifoOneShot, p_.cacheBytes, topo_.nranks, exchange);
  const double N = topo_.nranks, E = static_cast<double>(exchange);
  const double rootReduces = kind == CollKind::Reduce ? (N - 1) * static_cast<double>(bytes) : 0.0;
  return m.alphaUs + (N - 1) * E * m.betaUsPerB + ((N - 1) * E + rootReduces) * m.gammaUsPerB;
}

bool Model::agreementIsOneShot() const {
  return available(CollKind::AllReduce, Algo::kOneShot,
                   static_cast<size_t>(topo_.nranks) * algo::kCallRecordBytes);
}

double Model::agreementUs() const {
  const size_t bytes = static_cast<size_t>(topo_.nranks) * algo::kCallRecordBytes;
  return agreementIsOneShot() ? predictUs(CollKind::AllReduce, Algo::kOneShot, bytes)
                              : predictUs(CollKind::AllGather, Algo::kRing, bytes);
}

double Model::callUs(CollKind kind, Algo algorithm, size_t bytes) const {
  const double own = predictUs(kind, algorithm, bytes);
  if (!algo::hasRoot(kind) || topo_.nranks < 2 || algorithm == Algo::kOneShot) return own;
  return agreementUs() + own;
}

AlgorithmOverride::AlgorithmOverride(const std::string& spec) {
  if (spec.empty()) return;
  if (spec.find(':') == std::string::npos) {
    Algo a;
    bool known = parseAlgo(spec, &a);
    bool used = false;
    for (CollKind k : {CollKind::AllReduce, CollKind::Broadcast, CollKind::Reduce,
                       CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllToAll,
                       CollKind::Gather, CollKind::Scatter})
      used = used || (known && has(k, a));
    if (!used) fail(coilInvalidUsage, "COIL_ALGO=", spec, ": no collective has that algorithm");
    hasAll_ = true;
    all_ = a;
    return;
  }
  std::stringstream entries(spec);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    auto colon = entry.find(':');
    if (colon == std::string::npos)
      fail(coilInvalidUsage, "COIL_ALGO: expected collective:algorithm, got '", entry, "'");
    CollKind kind = kindOf(entry.substr(0, colon));
    const std::string name = entry.substr(colon + 1);
    Algo a;
    if (!parseAlgo(name, &a) || !has(kind, a))
      fail(coilInvalidUsage, "COIL_ALGO: ", entry.substr(0, colon), " has no algorithm '", name,
           "'");
    per_[kind] = a;
  }
}

bool AlgorithmOverride::forced(CollKind kind, Algo* algorithm) const {
  auto it = per_.find(kind);
  if (it != per_.end()) {
    *algorithm = it->second;
    return true;
  }
  if (hasAll_ && has(kind, all_)) {
    *algorithm = all_;
    return true;
  }
  return false;
}

Choice choose(const Model& model, CollKind kind, size_t bytes, const AlgorithmOverride& override,
              std::vector<Prediction>* predictions) {
  Model::LastChoice& last = model.last_;
  if (predictions == nullptr && last.valid && last.kind == kind && last.bytes == bytes)
    return last.choice;
  Choice choice{Algo::kRing, false, false};
  double bestUs = 0;
  bool found = false;
  for (Algo a : algorithmsFor(kind)) {
    if (!model.available(kind, a, bytes)) continue;
    double us = model.callUs(kind, a, bytes);
    if (predictions) predictions->push_back({a, us});
    if (!found || us < bestUs) choice.algorithm = a, bestUs = us, found = true;
  }
  Algo f;
  if (override.forced(kind, &f)) {
    if (model.available(kind, f, bytes)) choice = {f, true, false};
    else choice.forcedUnavailable = true;
  }
  choice.chunkBytes = model.chunkFor(kind, choice.algorithm, bytes);
  last = {true, kind, bytes, choice};
  return choice;
}

}  // namespace coil::tune
