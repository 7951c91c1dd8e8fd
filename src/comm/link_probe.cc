// Measuring the link across hosts at init.
//
// The cost model's built-in costs for tcp were measured over loopback; a
// real link between hosts (or the 1 Gbit/s capped veth of
// benchmarks/netns/two_hosts_shaped.sh) is many times slower per byte, and
// with loopback's β the tuner kept the flat ring where the hierarchical
// reduce-scatter was 1.3x faster, and chose the FIFO one-shot where it was
// 5.8x slower than hier (docs/performance.md §4.10). So when the ranks span
// hosts, rank 0 and the first rank of another host time a few ping-pongs
// over their real connection, rank 0 derives the link's α and β, and every
// rank adopts them with rank 0's other parameters: they still choose alike.
//
// What it costs: 20 round trips of 8 bytes, then messages from 64 KiB up,
// doubling while one transfer takes under kLongestTransferUs (at most
// 16 MiB): about 0.1 s on a 1 Gbit/s link, a few ms on a fast one, only on
// the two ranks that probe. COIL_LINK_PROBE=0, COIL_TUNE or COIL_TUNE_FILE
// turn it off (a calibration file is the better measurement).
//
// A child of coilCommSplit that borrows its parent's links (splitShare=1)
// does not probe: its parent may be running operations on those links while
// a non-blocking child joins (a probe there failed both with "the link is in
// use"). The link is the parent's, so the child adopts the parent's
// measurement, which every rank keeps with the links (LinkSet).
#include <algorithm>
#include <chrono>
#include <vector>

#include "comm/communicator.h"
#include "core/log.h"

namespace coil {
namespace {

constexpr int kLatencyRounds = 20;
constexpr size_t kFirstBytes = 64 << 10;
constexpr size_t kLargestBytes = 16 << 20;
constexpr double kLongestTransferUs = 20000;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void Communicator::probeLinkAcrossHosts() {
  LinkSet::MeasuredLink measured;
  int peer = -1;
  for (int r = 0; r < nranks_ && peer < 0; ++r)
    if (hostOfRank_[r] != hostOfRank_[0]) peer = r;
  if (peer >= 0 && (rank_ == 0 || rank_ == peer)) {
    const int other = rank_ == 0 ? peer : 0;
    std::vector<uint8_t> buffer(kLargestBytes);
    // One round trip of `bytes` each way; the one-way time is half of it.
    auto roundTripUs = [&](size_t bytes) {
      const P2pCall send{true, buffer.data(), bytes, coilUint8, other};
      const P2pCall recv{false, buffer.data(), bytes, coilUint8, other};
      const auto start = std::chrono::steady_clock::now();
      // On the path the collectives take across hosts: tcp's express
      // sockets, or its FIFOs where COIL_TUNE's caller=0 says so.
      const P2pPath path = P2pPath::kCollectives;
      if (rank_ == 0) {
        pointToPoint({send}, path);
        pointToPoint({recv}, path);
      } else {
        pointToPoint({recv}, path);
        pointToPoint({send}, path);
      }
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
          .count();
    };
    std::vector<double> small;
    for (int i = 0; i < kLatencyRounds; ++i) small.push_back(roundTripUs(8) / 2);
    // Both ranks stop growing at the same size: rank 0 decides and the
    // peer follows the sizes rank 0 sends (each size is a round trip, so
    // the peer learns rank 0's decision from the next message's size).
    double firstUs = roundTripUs(kFirstBytes) / 2, lastUs = firstUs;
    size_t lastBytes = kFirstBytes;
    for (size_t bytes = 2 * kFirstBytes; bytes <= kLargestBytes; bytes *= 2) {
      uint8_t more = lastUs < kLongestTransferUs;
      const P2pCall decision{rank_ == 0, &more, 1, coilUint8, other};
      pointToPoint({decision}, P2pPath::kCollectives);
      if (!more) break;
      lastUs = roundTripUs(bytes) / 2;
      lastBytes = bytes;
    }
    if (rank_ == 0) {
      measured.alphaUs = median(small);
      measured.betaUsPerB =
          lastBytes > kFirstBytes ? std::max(0.0, (lastUs - firstUs) / double(lastBytes - kFirstBytes))
                                  : firstUs / double(kFirstBytes);
      const std::string how = "the link to rank " + std::to_string(peer) + " measured at init";
      model_.setMeasuredLink(measured.alphaUs, measured.betaUsPerB, how);
      COIL_INFO(kTune, "link to rank ", peer, " (another host): alpha ", measured.alphaUs,
                " us, beta ", measured.betaUsPerB, " us/B (",
                measured.betaUsPerB > 0 ? 1.0 / measured.betaUsPerB / 1000.0 : 0.0, " GB/s), from ",
                lastBytes >> 10, " KiB transfers of ", lastUs,
                " us; the FIFO algorithms' costs are now these");
    }
  }
  // Every rank adopts rank 0's parameters, measured link included, and
  // keeps the measurement with its links for the children that borrow them.
  struct Record {
    tune::ModelParams params;
    LinkSet::MeasuredLink link;
  };
  std::vector<Record> all(static_cast<size_t>(nranks_));
  all[rank_] = {model_.params(), measured};
  bootstrap_->allGather(all.data(), sizeof(Record));
  model_.adopt(all[0].params);
  if (peer >= 0) links_->setMeasuredLink(all[0].link);
}

void Communicator::adoptParentsLink() {
  const std::optional<LinkSet::MeasuredLink>& link = links_->measuredLink();
  if (!link) return;  // the parent did not measure: no probe over links it may be using
  model_.setMeasuredLink(link->alphaUs, link->betaUsPerB,
                         "the link the parent communicator measured at init");
}

}  // namespace coil
