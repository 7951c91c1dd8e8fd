// The COIL_* variable table (src/core/variables.h): unknown names and bad
// values are warned about, good ones are not, an unregistered name cannot be
// read, the table's words are the ones the readers accept, and the first
// communicator init prints the warnings at the default log level.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "coil.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/log_settings.h"
#include "core/variables.h"
#include "reduce/kernel_table.h"
#include "transports/transport.h"

namespace coil::env {
namespace {

std::vector<std::string> warningsFor(std::vector<const char*> entries) {
  entries.push_back(nullptr);
  return environmentWarnings(entries.data());
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(Variables, UnknownNameIsWarnedWithTheClosestKnownName) {
  auto w = warningsFor({"COIL_ALOG=ring"});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "COIL_ALOG is not a coil variable (did you mean COIL_ALGO?)");
  w = warningsFor({"COIL_NSOCK=2", "COIL_DEBUG_SUBSYSTEM=ALL"});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], "COIL_NSOCK is not a coil variable (did you mean COIL_NSOCKS?)");
  EXPECT_EQ(w[1], "COIL_DEBUG_SUBSYSTEM is not a coil variable");  // 3 edits: no guess
}

TEST(Variables, UnknownNamesValueIsNeverQuoted) {
  const auto w = warningsFor({"COIL_SECRT=hunter2"});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("did you mean COIL_SECRET?"), std::string::npos) << w[0];
  EXPECT_EQ(w[0].find("hunter2"), std::string::npos) << w[0];
}

TEST(Variables, EnumerationValueOutsideItsWordsIsWarned) {
  auto w = warningsFor({"COIL_DEBUG=bogus"});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "COIL_DEBUG=bogus is not one of WARN, INFO, TRACE, ERROR, NONE");
  w = warningsFor({"COIL_TRANSPORT=TCP", "COIL_DEBUG_SUBSYS=INIT,NETT", "COIL_SPIN=sometimes"});
  ASSERT_EQ(w.size(), 3u) << joined(w);
  EXPECT_EQ(w[0], "COIL_TRANSPORT=TCP is not one of shm, ib, tcp");  // its reader is exact
  EXPECT_EQ(w[1], "COIL_DEBUG_SUBSYS=INIT,NETT: NETT is not one of INIT, BOOT, NET, SHM, COLL, "
                  "TUNE, ALL");
  EXPECT_NE(w[2].find("COIL_SPIN=sometimes is not one of adaptive, always"), std::string::npos);
}

TEST(Variables, NumbersAndBooleansOutsideTheirRangeAreWarned) {
  const auto w = warningsFor({"COIL_NSOCKS=17", "COIL_IB_DISABLE=yes", "COIL_SHM_SLOT_BYTES=1M"});
  ASSERT_EQ(w.size(), 3u) << joined(w);
  EXPECT_EQ(w[0], "COIL_NSOCKS=17 is not an integer in [1, 16]");
  EXPECT_EQ(w[1], "COIL_IB_DISABLE=yes is not 0 or 1");
  EXPECT_EQ(w[2], "COIL_SHM_SLOT_BYTES=1M is not a byte count in [4096, 67108864]");
}

TEST(Variables, KnownNamesWithGoodValuesAreNotWarned) {
  EXPECT_EQ(joined(warningsFor({"COIL_DEBUG=info", "COIL_DEBUG_SUBSYS=^coll,TUNE",
                                "COIL_TRANSPORT=tcp", "COIL_NSOCKS=4", "COIL_SHM_WINDOW=0",
                                "COIL_ALGO=allreduce:ring", "COIL_SECRET=anything at all",
                                "COIL_TIMEOUT_MS=", "COIL_TORCH_VENV=/tmp/venv",
                                "COIL_TEST_TRANSPORTS=ib", "PATH=/bin", "NCCL_DEBUG=INFO",
                                "COIL_DEBUG_FILE=/tmp/coil-%h-%p.log"})),
            "");
}

TEST(Variables, ReadingAnUnregisteredNameFails) {
  try {
    (void)get("COIL_NOT_A_REGISTERED_NAME");
    FAIL() << "env::get read an unregistered COIL_ name";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilInternalError);
    EXPECT_NE(std::string(e.what()).find("COIL_NOT_A_REGISTERED_NAME"), std::string::npos);
  }
  EXPECT_THROW((void)getInt("COIL_NOT_A_REGISTERED_NAME", 0, 1), Error);
  EXPECT_NO_THROW((void)get("COIL_DEBUG"));
  EXPECT_NO_THROW((void)get("HOME")) << "names outside COIL_ are the launchers' own";
}

TEST(Variables, EveryNameOnceAndEveryWordListNonEmpty) {
  for (size_t i = 0; i < variables().size(); ++i) {
    const Variable& v = variables()[i];
    EXPECT_TRUE(v.name.starts_with("COIL_")) << v.name;
    EXPECT_FALSE(v.meaning.empty()) << v.name;
    EXPECT_EQ(findVariable(v.name), &v) << v.name << " is in the table twice";
    if (v.kind == Kind::kOneOf || v.kind == Kind::kListOf) {
      EXPECT_FALSE(words(v).empty()) << v.name;
    }
    if (v.kind == Kind::kInteger || v.kind == Kind::kBytes) {
      EXPECT_LE(v.min, v.max) << v.name;
    }
  }
}

// The table's words must be what the readers accept, or the check would
// warn about good values (or miss bad ones).
TEST(Variables, WordsAreTheReadersWords) {
  for (std::string_view w : words(*findVariable("COIL_DEBUG"))) {
    const std::string word(w);
    if (word != "WARN") {
      EXPECT_NE(log::parseSettings(word.c_str(), nullptr, nullptr).level, log::Level::Warn) << word;
    }
  }
  for (std::string_view w : words(*findVariable("COIL_DEBUG_SUBSYS")))
    EXPECT_NE(log::parseSettings("INFO", std::string(w).c_str(), nullptr).mask, 0u) << w;
  const auto transportWords = words(*findVariable("COIL_TRANSPORT"));
  for (const std::string& name : transport::registeredTransports())
    EXPECT_NE(std::find(transportWords.begin(), transportWords.end(), name), transportWords.end())
        << name << " is a transport but not one of COIL_TRANSPORT's words";
  const auto isaWords = words(*findVariable("COIL_REDUCE_ISA"));
  ASSERT_EQ(isaWords.size(), size_t{reduce::kNumIsas});
  for (int i = 0; i < reduce::kNumIsas; ++i)
    EXPECT_EQ(isaWords[i], reduce::isaName(static_cast<reduce::Isa>(i)));
}

// Last: the check runs once per process. A misspelt name in the environment
// is printed at the default level (COIL_DEBUG unset) by the first init.
TEST(Variables, FirstCommunicatorInitWarnsAtTheDefaultLevel) {
  unsetenv("COIL_DEBUG");
  unsetenv("COIL_DEBUG_FILE");
  setenv("COIL_SOCKET_IFNAME", "lo", 0);
  setenv("COIL_ALOG", "ring", 1);
  setenv("COIL_DEBUG_SUBSYS", "INIT,BOGUS", 1);
  log::reload();
  testing::internal::CaptureStderr();
  coilUniqueId id;
  coilComm_t comm = nullptr;
  const coilResult_t got = coilGetUniqueId(&id);
  const coilResult_t init = got == coilSuccess ? coilCommInitRank(&comm, 1, id, 0) : got;
  if (comm != nullptr) coilCommDestroy(comm);
  const std::string err = testing::internal::GetCapturedStderr();
  unsetenv("COIL_ALOG");
  unsetenv("COIL_DEBUG_SUBSYS");
  ASSERT_EQ(init, coilSuccess) << coilGetLastError(nullptr) << "\n" << err;
  EXPECT_NE(err.find("WARN"), std::string::npos) << err;
  EXPECT_NE(err.find("COIL_ALOG is not a coil variable (did you mean COIL_ALGO?)"),
            std::string::npos) << err;
  EXPECT_NE(err.find("COIL_DEBUG_SUBSYS=INIT,BOGUS: BOGUS is not one of"), std::string::npos)
      << err;
}

}  // namespace
}  // namespace coil::env
