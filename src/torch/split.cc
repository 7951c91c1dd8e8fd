// CoilBackend::split: torch.distributed.split_group over coilCommSplit.
//
// torch calls it on every rank of the parent group, each with the ranks of
// its own child (a rank in none passes the first child's, without itself).
// The child's color is its smallest parent rank, so disjoint children get
// distinct colors, and its key is the rank's place in the list, so the
// child's ranks follow the list's order, as gloo's do.
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>

#include "coil_backend.h"
#include "coil_calls.h"
#include "torch_compat.h"

namespace coil_torch {

c10::intrusive_ptr<c10d::Backend> CoilBackend::split(
    const c10::intrusive_ptr<c10d::Store>& store,
    const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  TORCH_CHECK(!coalescing_, "coil backend: split_group inside a coalesced batch; end the batch "
              "first");
  TORCH_CHECK(!ranks.empty(), "coil backend: split_group: the list of ranks is empty");
  for (int r : ranks)
    TORCH_CHECK(r >= 0 && r < size_, "coil backend: split_group: rank ", r,
                " is not a rank of this group of ", size_);
  // torch's splitGroup calls split() once per device type of the group
  // (coil serves cpu and cuda) until one returns a child. A rank outside
  // every child gets null each time, so it would split twice where the
  // members split once. The store torch passes is one object per splitGroup
  // (held here, so that no later one can reuse its address): the second
  // call with it is the same split, done already.
  if (store == lastNoColorSplit_) return nullptr;
  const auto mine = std::find(ranks.begin(), ranks.end(), rank_);
  const bool member = mine != ranks.end();
  const int color = member ? *std::min_element(ranks.begin(), ranks.end()) : COIL_SPLIT_NOCOLOR;
  const int key = member ? static_cast<int>(mine - ranks.begin()) : 0;
  const std::chrono::milliseconds timeout =
      opts && opts->timeout.count() > 0 ? opts->timeout : timeout_;
  std::string name = opts ? torch_compat::groupName(*opts) : std::string();
  if (name.empty()) name = groupName_ + ":split";

  const uint64_t split = splits_++;  // every rank of this group splits as often

  // On the worker, as the group's next operation: every rank then splits at
  // the same place among the group's collectives, which coil matches by order.
  coilComm_t child = nullptr;
  c10::intrusive_ptr<c10d::Work> work =
      enqueue(c10d::OpType::UNKNOWN, {}, [&child, color, key, timeout, &name, ref = commRef()] {
        coilConfig_t config = COIL_CONFIG_INITIALIZER;
        config.blocking = 1;
        config.timeoutMs = timeout.count();
        config.commName = name.c_str();
        check(coilCommSplit(ref.get(), color, key, &child, &config), "coilCommSplit");
      });
  work->wait();
  if (!member) {
    lastNoColorSplit_ = store;
    return nullptr;
  }

  // Ranks that listed different children (overlapping lists) would make a
  // child of another size than this rank's list says.
  int childSize = 0;
  check(coilCommCount(child, &childSize), "coilCommCount");
  if (childSize != static_cast<int>(ranks.size())) {
    coilCommDestroy(child);
    TORCH_CHECK(false, "coil backend: split_group: this rank's group lists ", ranks.size(),
                " ranks but ", childSize, " ranks joined it: every rank must pass the same "
                "disjoint groups");
  }
  // The child's point-to-point rendezvous keys come from the parent's
  // store, numbered by this split and the child's color, which every member
  // shares. Not from `store`: torch prefixes it with the child's name,
  // which ranks can compute differently (after a new_group with
  // use_local_synchronization, which the ranks outside it never count).
  const std::string childKey =
      storeKey_ + "/split/" + std::to_string(split) + "/color/" + std::to_string(color);
  return c10::make_intrusive<CoilBackend>(store_, key, childSize, timeout, childKey, name, child);
}

}  // namespace coil_torch
