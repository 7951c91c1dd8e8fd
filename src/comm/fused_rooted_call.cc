// The rooted one-shot's executor: a small broadcast, reduce, gather or
// scatter whose data rides in its own agreement step. The program, its
// exchange layout and its cost are in algorithms/rooted_oneshot_program.h;
// the tuner offers it (as "oneshot") without a shared window, while each
// rank sends at most 64 KiB of payload, and picks it when it predicts it
// cheaper than the agreement plus the collective's other algorithms.
//
// Why: without a window the agreement is a round over tcp's express sockets
// or the FIFOs, and the call after it costs another round or more of proxy
// hand-offs: a 2-rank 8-byte broadcast over tcp took 67 µs against 12 µs
// for an all-reduce (docs/performance.md 4.6). In one round it costs what
// the all-reduce does.
//
// Every rank checks the records right after the exchange, exactly as the
// agreement alone does, before it takes any result. Ranks that disagree on
// the count exchange different sizes and fail with "different counts"; on
// anything else the records name both calls.
#include <cstring>
#include <vector>

#include "algorithms/fifo_oneshot.h"
#include "algorithms/rooted_oneshot_program.h"
#include "comm/communicator.h"
#include "core/log.h"
#include "reduce/reduce.h"

namespace coil {

void Communicator::runRootedOneShot(const algo::Call& call, uint64_t agreementTag) {
  const size_t n = static_cast<size_t>(nranks_);
  const size_t esize = call.elementBytes;
  const size_t payload = algo::rootedPayloadElems(call.kind, nranks_, call.count) * esize;
  const size_t total = algo::rootedExchangeBytes(nranks_, payload);
  const size_t recordsBytes = n * algo::kCallRecordBytes;
  flight_.setAlgorithm("oneshot with the agreement");
  if (log::enabled(log::Level::Info, log::kColl))
    COIL_INFO(kColl, call.description(), ": data and agreement in one one-shot of ", total,
              " bytes");

  std::vector<uint64_t>& words = fusedScratch_;
  words.assign(total / sizeof(uint64_t), 0);
  uint8_t* const base = reinterpret_cast<uint8_t*>(words.data());

  // The program's vocabulary on real buffers (elements of the call's type).
  struct Executor {
    Communicator& comm;
    const algo::Call& call;
    uint8_t* base;
    uint8_t* region;  // the payload, after the records
    size_t esize;
    size_t total;
    uint64_t tag;

    void pack(size_t at, size_t from, size_t count) {
      comm.writeCallRecord(call, base + static_cast<size_t>(comm.rank_) * algo::kCallRecordBytes);
      if (count != 0)
        std::memcpy(region + at * esize, static_cast<const uint8_t*>(call.input) + from * esize,
                    count * esize);
    }
    void exchange() {
      algo::Call sum = call;
      sum.kind = algo::CollKind::AllReduce;
      sum.sendbuff = sum.input = base;
      sum.recvbuff = sum.output = base;
      sum.count = total / sizeof(uint64_t);
      sum.elementBytes = sizeof(uint64_t);
      sum.bytes = total;
      sum.type = coilUint64;
      sum.op = sum.reduceOp = coilSum;
      sum.root = 0;
      sum.tag = tag;
      const tune::WaitPlan plan = comm.spin_.planFor(total);
      algo::fifoOneShotAllReduce(comm.peers_, comm.rank_, sum, comm.oneShotPaths(), plan.spinUs,
                                 plan.yield);
      comm.checkCallRecords(call, base);
    }
    void unpack(size_t at, size_t to, size_t count) {
      std::memcpy(static_cast<uint8_t*>(call.recvbuff) + to * esize, region + at * esize,
                  count * esize);
    }
    void reduceExchange(size_t count) {
      std::vector<const void*>& blocks = comm.fusedBlocks_;
      blocks.resize(static_cast<size_t>(comm.nranks_));
      for (size_t q = 0; q < blocks.size(); ++q) blocks[q] = region + q * count * esize;
      reduce::reduceInRankOrder(call.type, call.reduceOp, call.recvbuff, blocks.data(),
                                comm.nranks_, count);
    }
  } x{*this, call, base, base + recordsBytes, esize, total, agreementTag};
  algo::rootedOneShotProgram(x, {call.kind, rank_, nranks_, call.count, call.root});
}

}  // namespace coil
