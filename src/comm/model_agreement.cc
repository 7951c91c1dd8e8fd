#include "comm/model_agreement.h"

#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace coil {
namespace {

struct ModelRecord {
  tune::ModelParams params{};
  uint64_t algoHash = 0;  // FNV-1a of the whole COIL_ALGO value
  char algoText[64] = {};  // its start, for the message
};
static_assert(std::is_trivially_copyable_v<ModelRecord>);

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

void agreeOnModel(Bootstrap& bootstrap, int rank, int nranks, const std::string& algoSpec,
                  tune::Model& model) {
  std::vector<ModelRecord> all(static_cast<size_t>(nranks), ModelRecord{});
  ModelRecord& mine = all[rank];
  mine.params = model.params();
  mine.algoHash = fnv1a(algoSpec);
  std::snprintf(mine.algoText, sizeof mine.algoText, "%s", algoSpec.c_str());
  bootstrap.allGather(all.data(), sizeof(ModelRecord));
  for (int r = 0; r < nranks; ++r)
    if (all[r].algoHash != mine.algoHash)
      fail(coilInvalidUsage, "COIL_ALGO differs between ranks: rank ", r, " has '",
           all[r].algoText, "', rank ", rank, " has '", mine.algoText,
           "' (every rank must choose the same algorithms)");
  if (std::memcmp(&all[0].params, &mine.params, sizeof(tune::ModelParams)) != 0) {
    COIL_WARN(kTune, "rank ", rank, ": cost-model parameters (", model.origin(),
              ") differ from rank 0's; using rank 0's so that every rank chooses alike");
    model.adopt(all[0].params);
  }
}

}  // namespace coil
