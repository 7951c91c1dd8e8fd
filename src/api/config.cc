#include "api/config.h"

#include <cctype>
#include <cstddef>
#include <string>

#include "core/env.h"
#include "core/error.h"

namespace coil::api {
namespace {

// True when the caller's struct is new enough to hold `field` (a struct
// from an older coil.h is smaller, and its tail is someone else's memory).
template <typename Field>
bool has(const coilConfig_t* config, unsigned version, const Field& field) {
  const size_t end = static_cast<size_t>(reinterpret_cast<const char*>(&field) -
                                         reinterpret_cast<const char*>(config)) +
                     sizeof(Field);
  return config->version >= version && config->size >= end;
}

// A CTA count or cluster size: a GPU kernel's shape, which coil, running on
// host threads, does not use; checked so that a typo still fails as on NCCL.
void checkKernelShape(const coilConfig_t* config) {
  const int undef = COIL_CONFIG_UNDEF_INT;
  if (config->cgaClusterSize != undef && (config->cgaClusterSize < 0 || config->cgaClusterSize > 8))
    fail(coilInvalidArgument, "config->cgaClusterSize must be 0..8 (got ",
         config->cgaClusterSize, ")");
  if (config->minCTAs != undef && config->minCTAs < 1)
    fail(coilInvalidArgument, "config->minCTAs must be >= 1 (got ", config->minCTAs, ")");
  if (config->maxCTAs != undef && config->maxCTAs < 1)
    fail(coilInvalidArgument, "config->maxCTAs must be >= 1 (got ", config->maxCTAs, ")");
  if (config->minCTAs != undef && config->maxCTAs != undef && config->minCTAs > config->maxCTAs)
    fail(coilInvalidArgument, "config->minCTAs (", config->minCTAs, ") is larger than maxCTAs (",
         config->maxCTAs, ")");
}

}  // namespace

std::string transportForNetName(const std::string& netName) {
  std::string lower;
  for (char c : netName) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "socket" || lower == "tcp") return "tcp";
  if (lower == "ib" || lower == "shm") return lower;
  fail(coilInvalidArgument, "config->netName '", netName,
       "' names no network coil has: use \"shm\", \"tcp\" (NCCL's \"Socket\") or \"ib\" "
       "(NCCL's \"IB\")");
}

CommOptions optionsFrom(const coilConfig_t* config) {
  CommOptions opts;
  int64_t configured = 0;
  if (config) {
    if (config->size < sizeof(size_t) + 2 * sizeof(unsigned) || config->magic != COIL_CONFIG_MAGIC)
      fail(coilInvalidArgument,
           "config was not initialised with COIL_CONFIG_INITIALIZER (bad size or magic)");
    if (config->version > COIL_CONFIG_VERSION)
      fail(coilInvalidArgument, "config version ", config->version, " is newer than this coil (",
           COIL_CONFIG_VERSION, ")");
    if (config->blocking != COIL_CONFIG_UNDEF_INT && config->blocking != 0 &&
        config->blocking != 1)
      fail(coilInvalidArgument, "config->blocking must be 0 or 1 (got ", config->blocking, ")");
    configured = config->timeoutMs;
    if (config->commName) opts.name = config->commName;
    if (has(config, 2, config->splitShare) && config->splitShare != COIL_CONFIG_UNDEF_INT) {
      if (config->splitShare != 0 && config->splitShare != 1)
        fail(coilInvalidArgument, "config->splitShare must be 0 or 1 (got ", config->splitShare,
             ")");
      opts.splitShare = config->splitShare;
    }
    if (has(config, 3, config->netName)) {
      checkKernelShape(config);
      if (config->netName != nullptr) opts.transport = transportForNetName(config->netName);
    }
  }
  opts.timeoutMs = resolveTimeoutMs(configured);
  return opts;
}

bool resolveSplitShare(const CommOptions& child, const CommOptions& parent) {
  if (child.splitShare >= 0) return child.splitShare == 1;
  if (parent.splitShare >= 0) return parent.splitShare == 1;
  return env::getInt("COIL_SPLIT_SHARE", 0, 1).value_or(0) == 1;
}

bool isBlocking(const coilConfig_t* config) {
  return config == nullptr || config->blocking == COIL_CONFIG_UNDEF_INT || config->blocking != 0;
}

}  // namespace coil::api
