// Rooted collectives check, before they move any data, that every rank is
// in the same call: same collective, count, datatype, op and root.
//
// The fingerprint on every slot cannot catch a disagreement about the root.
// In a broadcast the root only sends, so two ranks that each believe they
// are the root never read each other's data: both return success, with
// different data on different ranks. In a gather or reduce both wait to
// receive, and nobody sends. So each rank first contributes a small record
// of its call, all records reach every rank, and every rank compares them.
// Every rank sees the same records, so every rank fails, with the same
// message naming both calls.
//
// Cost: one small all-reduce of 24 bytes per rank, through the one-shot (the
// shared window on one host, tcp's express socket otherwise), or a ring
// all-gather where the one-shot cannot carry n records (tune::Model's
// agreementUs predicts it). Without a window, a small call's data rides in
// the same one-shot instead: the rooted one-shot (fused_rooted_call.cc).
// Only broadcast, reduce, gather and scatter pay it; all-reduce, the
// all-gathers and all-to-all read data from every side, and their
// fingerprints already catch every disagreement.
#include <cstring>
#include <sstream>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/fifo_executor.h"
#include "algorithms/rooted_oneshot_program.h"
#include "comm/communicator.h"
#include "core/error.h"
#include "reduce/reduce.h"

namespace coil {
namespace {

// What a rank says about its call. Fixed size, no padding.
struct CallRecord {
  uint32_t kind;
  int32_t type;
  int32_t op;
  int32_t root;
  uint64_t count;

  bool operator==(const CallRecord&) const = default;
};
static_assert(sizeof(CallRecord) == algo::kCallRecordBytes);

CallRecord recordOf(const algo::Call& call) {
  return CallRecord{static_cast<uint32_t>(call.kind), static_cast<int32_t>(call.type),
                    static_cast<int32_t>(call.op), call.root, call.count};
}

std::string describeRecord(const CallRecord& r) {
  std::ostringstream os;
  os << algo::collName(static_cast<algo::CollKind>(r.kind)) << " (" << r.count << " x "
     << reduce::typeName(static_cast<coilDataType_t>(r.type));
  if (static_cast<algo::CollKind>(r.kind) == algo::CollKind::Reduce)
    os << ", " << (reduce::validOp(static_cast<coilRedOp_t>(r.op)) ? reduce::opName(static_cast<coilRedOp_t>(r.op)) : "premulsum");
  os << ", root " << r.root << ")";
  return os.str();
}

}  // namespace

void Communicator::writeCallRecord(const algo::Call& call, uint8_t* at) {
  const CallRecord mine = recordOf(call);
  std::memcpy(at, &mine, sizeof mine);
}

void Communicator::checkCallRecords(const algo::Call& call, const uint8_t* records) const {
  const CallRecord mine = recordOf(call);
  for (int q = 0; q < nranks_; ++q) {
    CallRecord theirs;
    std::memcpy(&theirs, records + static_cast<size_t>(q) * sizeof theirs, sizeof theirs);
    if (theirs == mine) continue;
    fail(coilInvalidUsage, call.description(), ": mismatched call: rank ", q, " called ",
         describeRecord(theirs), " where rank ", rank_, " called ", describeRecord(mine));
  }
}

uint64_t Communicator::agreementTag(algo::CollKind kind, uint32_t seq) const {
  // Only the call number and the collective: ranks that differ in count,
  // type, op or root must get through the exchange to compare records.
  return algo::Fingerprint{seq + seqSalt_, kind, coilInt8, coilSum, 0}.encode();
}

void Communicator::agreeOnCall(const algo::Call& call, uint64_t agreementTag) {
  std::vector<CallRecord> all(static_cast<size_t>(nranks_));
  all[static_cast<size_t>(rank_)] = recordOf(call);
  const size_t bytes = all.size() * sizeof(CallRecord);
  // The exchange is a call of its own (its buffers, size and fingerprint);
  // it waits, and describes itself, as the call it checks.
  auto exchange = [&](algo::CollKind kind, coilDataType_t type, size_t elementBytes,
                      size_t blockBytes) {
    return algo::Call{.kind = kind,
                      .sendbuff = all.data(),
                      .recvbuff = all.data(),
                      .input = all.data(),
                      .output = all.data(),
                      .count = blockBytes / elementBytes,
                      .elementBytes = elementBytes,
                      .bytes = blockBytes,
                      .type = type,
                      .op = coilSum,
                      .reduceOp = coilSum,
                      .root = 0,
                      .tag = agreementTag,
                      .sliceElems = sliceBytes_ / elementBytes,
                      .chunkElems = sliceBytes_ / elementBytes,
                      .watch = call.watch,
                      .describe = call.describe};
  };
  if (model_.agreementIsOneShot()) {
    // An all-gather as the fastest small all-reduce there is (the window,
    // or tcp's express socket): every rank's record in its own block, zeros
    // elsewhere, summed.
    runDirect(exchange(algo::CollKind::AllReduce, coilUint64, sizeof(uint64_t), bytes),
              tune::Algo::kOneShot);
  } else {
    // A ring all-gather of one record (in bytes) per rank.
    const algo::Call gather = exchange(algo::CollKind::AllGather, coilUint8, 1, sizeof(CallRecord));
    algo::FifoExecutor exec(peers_, gather);
    algo::ringAllGather(exec, algo::shapeOf(gather, rank_, nranks_));
  }
  checkCallRecords(call, reinterpret_cast<const uint8_t*>(all.data()));
}

}  // namespace coil
