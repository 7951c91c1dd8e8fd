#include "coil_calls.h"

#include <algorithm>
#include <cstring>

namespace coil_perf {

namespace {

const char* resultName(coilResult_t result) {
  static const char* const kNames[] = {
      "coilSuccess",        "coilUnhandledCudaError", "coilSystemError",
      "coilInternalError",  "coilInvalidArgument",    "coilInvalidUsage",
      "coilRemoteError",    "coilInProgress",         "coilTimeout"};
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
  coilCheck(coilAllReduce(table.data(), table.data(), table.size(), coilUint8, coilSum, comm,
                          nullptr),
            "coilAllReduce(host table)", comm);
  std::vector<std::string> out;
  for (int r = 0; r < nranks; ++r) {
    const char* slot = reinterpret_cast<const char*>(&table[kSlot * static_cast<size_t>(r)]);
    out.emplace_back(slot, strnlen(slot, kSlot));
  }
  return out;
}

}  // namespace coil_perf
