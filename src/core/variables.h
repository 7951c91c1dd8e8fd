// The one table of COIL_* environment variables (variables.cc).
//
// Why it exists: the variables used to be read wherever they were needed, so
// a misspelt name (COIL_ALOG=ring) or a value no reader knows
// (COIL_DEBUG=bogus) was silently ignored, and README's list could drift
// from the code. Now env::get refuses a COIL_ name that is not here, the
// first communicator init warns about unknown names and bad values, and
// tests/tools/variables_table_test.py checks README's table against it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace coil::env {

/// Who reads the variable. README's table lists kLibrary and kTorch; the
/// kDevelopment ones are documented where they are read and are here only
/// so that setting them is not warned about.
enum class Scope {
  kLibrary,      ///< libcoil at run time
  kTorch,        ///< the PyTorch adapter, the coil_torch package and their build
  kDevelopment,  ///< the repository's tests, benchmarks and scripts
};

enum class Kind {
  kInteger,  ///< decimal integer in [min, max]
  kBytes,    ///< byte count (decimal, no suffix) in [min, max]
  kBoolean,  ///< 0 or 1
  kOneOf,    ///< one of `words`
  kListOf,   ///< comma list of `words`, optionally after ^ (all but)
  kText,     ///< free text: a spec, a name, a list; its reader checks it
  kPath,     ///< a file or folder
};

struct Variable {
  std::string_view name;
  Scope scope;
  Kind kind;
  int64_t min = 0, max = 0;   ///< kInteger, kBytes
  std::string_view words;     ///< kOneOf, kListOf: the allowed words, space-separated
  bool ignoreCase = false;    ///< kOneOf, kListOf: as the reader compares
  std::string_view meaning;   ///< one line
};

/// Every registered variable, in table order.
std::span<const Variable> variables();
/// The entry for `name`, or null.
const Variable* findVariable(std::string_view name);
/// The allowed words of a kOneOf or kListOf variable.
std::vector<std::string_view> words(const Variable& v);

/// One warning per entry ("NAME=VALUE") of `environment` (null-terminated,
/// as environ) that starts with COIL_ and is not registered (naming the
/// closest registered name within edit distance 2), or whose non-empty value
/// does not fit its kind. Values of kText and kPath variables and of
/// unknown names are never quoted (one may be a secret).
std::vector<std::string> environmentWarnings(const char* const* environment);

/// Logs environmentWarnings(environ) at WARN, once per process: called at
/// every communicator init, it acts at the first.
void warnAboutEnvironmentOnce();

}  // namespace coil::env
