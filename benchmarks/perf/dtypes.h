// The element types and reduction operators coil_perf sweeps, with their
// command-line names. One table each; everything else looks things up here.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "coil.h"

namespace coil_perf {

/// How the bits of an element encode a number (drives the checker).
enum class Encoding { SignedInt, UnsignedInt, Half, Bfloat16, Float, Double };

struct TypeInfo {
  const char* name;     ///< name printed in the table and accepted by -d
  coilDataType_t type;  ///< coil's enum
  size_t size;          ///< bytes per element
  Encoding encoding;
};

struct OpInfo {
  const char* name;  ///< name printed in the table and accepted by -o
  coilRedOp_t op;
};

/// Every type, in the order `-d all` runs them.
const std::vector<TypeInfo>& allTypes();
/// Every operator, in the order `-o all` runs them: NCCL's five, then the
/// bitwise band, bor and bxor.
const std::vector<OpInfo>& allOps();

/// True for band, bor and bxor.
bool isBitwise(coilRedOp_t op);
/// False for a bitwise operator on a float type: coil refuses the pair, and
/// a sweep skips it.
bool opTakesType(const OpInfo& op, const TypeInfo& type);

/// The types named by `names`: "all", or a comma list ("float,half,bf16").
/// Throws UsageError listing the accepted names if unknown.
std::vector<TypeInfo> parseTypes(const std::string& name);
/// The operators named by `names`: "all", or a comma list ("sum,avg").
/// Throws UsageError.
std::vector<OpInfo> parseOps(const std::string& name);

/// "a,b,,c" -> {"a", "b", "", "c"} (empty parts are kept, so that the
/// parsers can reject them by name).
std::vector<std::string> splitCommas(const std::string& text);

/// The name of `op` ("sum", ...); "premulsum" for ops outside allOps().
const char* opNameOf(coilRedOp_t op);

/// The entry of `type`; the type must be one of allTypes().
const TypeInfo& typeInfo(coilDataType_t type);

}  // namespace coil_perf
