#include "dtypes.h"

#include <stdexcept>

#include "units.h"

namespace coil_perf {

const std::vector<TypeInfo>& allTypes() {
  static const std::vector<TypeInfo> kTypes = {
      {"float", coilFloat32, 4, Encoding::Float},
      {"half", coilFloat16, 2, Encoding::Half},
      {"bfloat16", coilBfloat16, 2, Encoding::Bfloat16},
      {"double", coilFloat64, 8, Encoding::Double},
      {"int8", coilInt8, 1, Encoding::SignedInt},
      {"uint8", coilUint8, 1, Encoding::UnsignedInt},
      {"int32", coilInt32, 4, Encoding::SignedInt},
      {"uint32", coilUint32, 4, Encoding::UnsignedInt},
      {"int64", coilInt64, 8, Encoding::SignedInt},
      {"uint64", coilUint64, 8, Encoding::UnsignedInt},
  };
  return kTypes;
}

const std::vector<OpInfo>& allOps() {
  static const std::vector<OpInfo> kOps = {
      {"sum", coilSum}, {"prod", coilProd}, {"max", coilMax},  {"min", coilMin},
      {"avg", coilAvg}, {"band", coilBand}, {"bor", coilBor},  {"bxor", coilBxor},
  };
  return kOps;
}

bool isBitwise(coilRedOp_t op) { return op == coilBand || op == coilBor || op == coilBxor; }

bool opTakesType(const OpInfo& op, const TypeInfo& type) {
  const bool integer = type.encoding == Encoding::SignedInt || type.encoding == Encoding::UnsignedInt;
  return !isBitwise(op.op) || integer;
}

namespace {

struct Alias {
  const char* alias;
  const char* name;
};

// Spellings people bring from NCCL, PyTorch and numpy.
constexpr Alias kTypeAliases[] = {
    {"float32", "float"}, {"fp32", "float"},       {"f32", "float"},
    {"float16", "half"},  {"fp16", "half"},        {"f16", "half"},
    {"bf16", "bfloat16"}, {"float64", "double"},   {"fp64", "double"},
    {"f64", "double"},    {"char", "int8"},        {"int", "int32"},
};

std::string joinNames(const char* const* first, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += std::string(i ? ", " : "") + first[i];
  return out;
}

TypeInfo parseOneType(const std::string& name) {
  std::string wanted = name;
  for (const Alias& a : kTypeAliases) {
    if (wanted == a.alias) wanted = a.name;
  }
  for (const TypeInfo& t : allTypes()) {
    if (wanted == t.name) return t;
  }
  static const char* const kNames[] = {"float", "half", "bfloat16", "double", "int8", "uint8",
                                       "int32", "uint32", "int64", "uint64", "all"};
  throw UsageError("-d: unknown type '" + name + "' (one of " + joinNames(kNames, 11) + ")");
}

OpInfo parseOneOp(const std::string& name) {
  for (const OpInfo& o : allOps()) {
    if (name == o.name) return o;
  }
  throw UsageError("-o: unknown operator '" + name +
                   "' (one of sum, prod, max, min, avg, band, bor, bxor, all)");
}

}  // namespace

std::vector<std::string> splitCommas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

std::vector<TypeInfo> parseTypes(const std::string& names) {
  if (names == "all") return allTypes();
  std::vector<TypeInfo> types;
  for (const std::string& name : splitCommas(names)) types.push_back(parseOneType(name));
  return types;
}

std::vector<OpInfo> parseOps(const std::string& names) {
  if (names == "all") return allOps();
  std::vector<OpInfo> ops;
  for (const std::string& name : splitCommas(names)) ops.push_back(parseOneOp(name));
  return ops;
}

const char* opNameOf(coilRedOp_t op) {
  for (const OpInfo& o : allOps()) {
    if (o.op == op) return o.name;
  }
  return "premulsum";
}

const TypeInfo& typeInfo(coilDataType_t type) {
  for (const TypeInfo& t : allTypes()) {
    if (t.type == type) return t;
  }
  throw std::logic_error("typeInfo: type " + std::to_string(static_cast<int>(type)) +
                         " is not in the table");
}

}  // namespace coil_perf
