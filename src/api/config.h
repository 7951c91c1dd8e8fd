// coilConfig_t, read: from the caller's struct (of any version up to this
// header's) to the CommOptions a Communicator takes.
#pragma once

#include "comm/communicator.h"

namespace coil::api {

/// Validates `config` (may be null: the defaults) and returns its options.
/// A field the caller's (older, smaller) struct does not have, or one left
/// at its UNDEF value, takes its default. Throws coilInvalidArgument naming
/// the bad field.
CommOptions optionsFrom(const coilConfig_t* config);

/// True unless config->blocking is 0.
bool isBlocking(const coilConfig_t* config);

/// splitShare of a split: the split's config, else the parent's (its init
/// config or the split that made it), else COIL_SPLIT_SHARE, else off.
bool resolveSplitShare(const CommOptions& child, const CommOptions& parent);

/// coil's transport for a netName: a transport's own name, or NCCL's
/// network names ("Socket" is tcp, "IB" is ib), in any case. Throws
/// coilInvalidArgument for a name it does not know.
std::string transportForNetName(const std::string& netName);

}  // namespace coil::api
