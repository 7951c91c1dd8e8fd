// coilCommShrink's plan: which ranks remain, and where they meet.
//
// The excluded ranks do not take part, so nothing here may use the
// bootstrap ring (it runs through them). With a healthy parent
// (COIL_SHRINK_DEFAULT) the remaining ranks talk over their own
// connections: the lowest of them starts the new root and sends its id to
// each of the others, point to point, together with a hash of the excluded
// list, so ranks that disagree about the list fail instead of meeting in
// different communicators.
//
// After a failure (COIL_SHRINK_ABORT) those connections are closed, and a
// dead rank may sit anywhere on the ring. The remaining ranks then meet
// without exchanging anything first: each derives the same id on its own.
// The root is the lowest remaining rank, at the address its ring listener
// had (every rank got it from the parent's root; the listener itself closed
// once the ring formed, so the port is free for the new root), and the
// secret and nonce are a hash of the parent's secret, how many abort-mode
// shrinks this rank made of the parent, and the excluded list. Ranks that
// disagree on the list derive different secrets and fail to authenticate.
#include <algorithm>
#include <cstring>

#include "comm/communicator.h"
#include "net/sha256.h"

namespace coil {
namespace {

// What the leader sends each remaining rank.
struct ShrinkNotice {
  coilUniqueId id;
  uint8_t excludedHash[16];
};

// A hash of the sorted excluded list (which may be empty: nothing excluded).
Sha256Digest excludedDigest(const std::vector<int>& sorted) {
  Sha256 h;
  const uint64_t count = sorted.size();
  h.update(&count, sizeof count);
  for (int r : sorted) h.update(&r, sizeof r);
  return h.finish();
}

}  // namespace

std::vector<int> shrinkMembers(int nranks, const std::vector<int>& excluded) {
  std::vector<bool> gone(static_cast<size_t>(nranks), false);
  for (int r : excluded) gone[static_cast<size_t>(r)] = true;
  std::vector<int> members;
  for (int r = 0; r < nranks; ++r)
    if (!gone[static_cast<size_t>(r)]) members.push_back(r);
  return members;
}

SplitPlan Communicator::planShrink(const std::vector<int>& excluded) {
  checkUsable();
  SplitPlan plan;
  plan.member = true;
  plan.parentRanks = shrinkMembers(nranks_, excluded);
  plan.nranks = static_cast<int>(plan.parentRanks.size());
  plan.rank = static_cast<int>(
      std::find(plan.parentRanks.begin(), plan.parentRanks.end(), rank_) - plan.parentRanks.begin());
  std::vector<int> sorted = excluded;
  std::sort(sorted.begin(), sorted.end());
  const Sha256Digest digest = excludedDigest(sorted);

  ShrinkNotice notice;
  std::memset(&notice, 0, sizeof notice);
  const int leader = plan.parentRanks.front();
  std::vector<P2pCall> calls;
  if (rank_ == leader) {
    SocketAddress bind = bootstrap_->localAddress();
    bind.setPort(0);
    notice.id = encodeUniqueId(startRoot(bind, options_.timeoutMs));
    std::memcpy(notice.excludedHash, digest.data(), sizeof notice.excludedHash);
    for (int r : plan.parentRanks)
      if (r != rank_) calls.push_back({true, &notice, sizeof notice, coilUint8, r});
  } else {
    calls.push_back({false, &notice, sizeof notice, coilUint8, leader});
  }
  if (!calls.empty()) pointToPoint(calls);  // a failure breaks this communicator
  if (std::memcmp(notice.excludedHash, digest.data(), sizeof notice.excludedHash) != 0)
    fail(coilInvalidUsage, "coilCommShrink: the ranks disagree on excludeRanksList (parent rank ",
         leader, ", which hosts the new communicator's rendezvous, excludes other ranks than "
         "this one)");
  plan.id = decodeUniqueId(notice.id);
  return plan;
}

SplitPlan Communicator::planShrinkAfterAbort(const std::vector<int>& excluded) {
  SplitPlan plan;
  plan.member = true;
  plan.parentRanks = shrinkMembers(nranks_, excluded);
  plan.nranks = static_cast<int>(plan.parentRanks.size());
  plan.rank = static_cast<int>(
      std::find(plan.parentRanks.begin(), plan.parentRanks.end(), rank_) - plan.parentRanks.begin());
  std::vector<int> sorted = excluded;
  std::sort(sorted.begin(), sorted.end());
  const uint32_t generation = ++abortShrinks_;
  Sha256 h;
  h.update("coil-shrink-after-abort");
  h.update(bootstrap_->secret(), 16);
  h.update(&generation, sizeof generation);
  const Sha256Digest excludedHash = excludedDigest(sorted);
  h.update(excludedHash.data(), excludedHash.size());
  const Sha256Digest digest = h.finish();
  UniqueIdData& id = plan.id;
  id.root = bootstrap_->listenerOf(plan.parentRanks.front());
  std::memcpy(id.secret, digest.data(), sizeof id.secret);
  std::memcpy(&id.nonce, digest.data() + sizeof id.secret, sizeof id.nonce);
  id.rootHostedByRank0 = true;  // the new rank 0, the lowest remaining rank, starts it
  return plan;
}

}  // namespace coil
