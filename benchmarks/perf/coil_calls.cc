#include "coil_calls.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace coil_perf {

namespace {

const char* resultName(coilResult_t result) {
  static const char* const kNames[] = {
      "coilSuccess",       "coilUnhandledCudaError", "coilSystemError",
      "coilInternalError", "coilInvalidArgument",    "coilInvalidUsage",
      "coilRemoteError",   "coilInProgress",         "coilTimeout"};
  const int i = static_cast<int>(result);
  return i >= 0 && i < static_cast<int>(sizeof(kNames) / sizeof(kNames[0])) ? kNames[i]
                                                                            : "unknown result";
}

}  // namespace

std::string describeFailure(coilResult_t result, const char* call, coilComm_t comm) {
  // coil's messages usually start with the call's name already.
  std::string message = coilGetLastError(comm);
  if (message.empty()) message = coilGetErrorString(result);
  if (message.rfind(call, 0) != 0) message = std::string(call) + ": " + message;
  return message + " [" + resultName(result) + "]";
}

void coilCheck(coilResult_t result, const char* call, coilComm_t comm) {
  if (result == coilSuccess) return;
  throw CoilFailure(describeFailure(result, call, comm), result);
}

void runCoil(const CollCall& c, coilComm_t comm, int rank, int nranks, coilStream_t stream) {
  const coilDataType_t t = c.type.type;
  switch (c.coll) {
    case Collective::AllReduce:
      return coilCheck(coilAllReduce(c.send, c.recv, c.count, t, c.op, comm, stream),
                       "coilAllReduce", comm);
    case Collective::Broadcast:
      return coilCheck(coilBroadcast(c.send, c.recv, c.count, t, c.root, comm, stream),
                       "coilBroadcast", comm);
    case Collective::Reduce:
      return coilCheck(coilReduce(c.send, c.recv, c.count, t, c.op, c.root, comm, stream),
                       "coilReduce", comm);
    case Collective::AllGather:
      return coilCheck(coilAllGather(c.send, c.recv, c.count, t, comm, stream), "coilAllGather",
                       comm);
    case Collective::ReduceScatter:
      return coilCheck(coilReduceScatter(c.send, c.recv, c.count, t, c.op, comm, stream),
                       "coilReduceScatter", comm);
    case Collective::AllToAll:
      return coilCheck(coilAlltoAll(c.send, c.recv, c.count, t, comm, stream), "coilAlltoAll",
                       comm);
    case Collective::Gather:
      return coilCheck(coilGather(c.send, c.recv, c.count, t, c.root, comm, stream), "coilGather",
                       comm);
    case Collective::Scatter:
      return coilCheck(coilScatter(c.send, c.recv, c.count, t, c.root, comm, stream),
                       "coilScatter", comm);
    case Collective::SendRecv: {
      // The group must be closed whatever happens inside it; a failure of a
      // queued call is reported by coilGroupEnd, the first one wins.
      coilCheck(coilGroupStart(), "coilGroupStart", nullptr);
      const coilResult_t sent = coilSend(c.send, c.count, t, (rank + 1) % nranks, comm, stream);
      const coilResult_t received =
          coilRecv(c.recv, c.count, t, (rank - 1 + nranks) % nranks, comm, stream);
      const coilResult_t ended = coilGroupEnd();
      coilCheck(sent, "coilSend", comm);
      coilCheck(received, "coilRecv", comm);
      return coilCheck(ended, "coilGroupEnd", comm);
    }
  }
}

double timeCoil(const CollCall& call, coilComm_t comm, int rank, int nranks, const Timing& t) {
  for (int i = 0; i < t.warmup; ++i) runCoil(call, comm, rank, nranks, t.stream);
  if (t.sync) t.sync();     // device buffers: the warm-up has run
  maxOverRanks(comm, 0.0);  // a barrier: start the clocks together
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < t.iters; ++i) {
    if (t.aggIters > 1) coilCheck(coilGroupStart(), "coilGroupStart", nullptr);
    try {
      for (int a = 0; a < t.aggIters; ++a) runCoil(call, comm, rank, nranks, t.stream);
    } catch (...) {
      if (t.aggIters > 1) coilGroupEnd();  // close the group; the first error wins
      throw;
    }
    if (t.aggIters > 1) coilCheck(coilGroupEnd(), "coilGroupEnd", comm);
    // Calls on host buffers return complete, so there -z only adds
    // nccl-tests' barrier; it cannot go inside a group, hence once per
    // iteration. Calls on device buffers are waited for first.
    if (t.blocking != 0 && t.sync) t.sync();
    if (t.blocking == 1 || t.blocking == 3) {
      coilCheck(coilBarrier(comm, nullptr), "coilBarrier", comm);
    }
  }
  if (t.sync) t.sync();  // device buffers: as nccl-tests, the clock stops once the stream has run
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return combineOverRanks(comm, elapsed.count() / (static_cast<double>(t.iters) * t.aggIters),
                          t.average, rank, nranks);
}

double combineOverRanks(coilComm_t comm, double value, Average how, int rank, int nranks) {
  double result = 0;
  switch (how) {
    case Average::Rank0: {
      const double mine = rank == 0 ? value : 0.0;
      coilCheck(coilAllReduce(&mine, &result, 1, coilFloat64, coilSum, comm, nullptr),
                "coilAllReduce(rank 0's timing)", comm);
      return result;
    }
    case Average::Mean:
      coilCheck(coilAllReduce(&value, &result, 1, coilFloat64, coilSum, comm, nullptr),
                "coilAllReduce(mean of timings)", comm);
      return result / nranks;
    case Average::Min:
      coilCheck(coilAllReduce(&value, &result, 1, coilFloat64, coilMin, comm, nullptr),
                "coilAllReduce(min of timings)", comm);
      return result;
    case Average::Max: return maxOverRanks(comm, value);
  }
  return value;
}

double maxOverRanks(coilComm_t comm, double value) {
  double result = 0;
  coilCheck(coilAllReduce(&value, &result, 1, coilFloat64, coilMax, comm, nullptr),
            "coilAllReduce(max of timings)", comm);
  return result;
}

uint64_t sumOverRanks(coilComm_t comm, uint64_t value) {
  uint64_t result = 0;
  coilCheck(coilAllReduce(&value, &result, 1, coilUint64, coilSum, comm, nullptr),
            "coilAllReduce(sum of counts)", comm);
  return result;
}

std::vector<std::string> gatherText(coilComm_t comm, int rank, int nranks,
                                    const std::string& text) {
  constexpr size_t kSlot = 64;
  std::vector<unsigned char> table(kSlot * static_cast<size_t>(nranks), 0);
  std::memcpy(&table[kSlot * static_cast<size_t>(rank)], text.data(),
              std::min(text.size(), kSlot - 1));
  coilCheck(
      coilAllReduce(table.data(), table.data(), table.size(), coilUint8, coilSum, comm, nullptr),
      "coilAllReduce(host table)", comm);
  std::vector<std::string> out;
  for (int r = 0; r < nranks; ++r) {
    const char* slot = reinterpret_cast<const char*>(&table[kSlot * static_cast<size_t>(r)]);
    out.emplace_back(slot, strnlen(slot, kSlot));
  }
  return out;
}

}  // namespace coil_perf
