// The table and the dispatcher: argument checks, names, every table entry
// present, the ISA choice against /proc/cpuinfo, and COIL_REDUCE_ISA.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/error.h"
#include "reduce/kernel_table.h"
#include "test_data.h"

namespace coil::reduce {
namespace {

using testing::kAllTypes;

TEST(Dispatch, ValidTypeAndOpRejectOutOfRange) {
  for (int t = 0; t < coilNumTypes; ++t) EXPECT_TRUE(validType(t)) << t;
  for (int op = 0; op < coilNumOps; ++op) EXPECT_TRUE(validOp(op)) << op;
  for (int bad : {-1, int{coilNumTypes}, coilNumTypes + 1, 1 << 20}) EXPECT_FALSE(validType(bad)) << bad;
  for (int bad : {-1, int{coilNumOps}, 99}) EXPECT_FALSE(validOp(bad)) << bad;
}

TEST(Dispatch, InvalidArgumentsThrowInvalidArgument) {
  auto expectInvalid = [](auto&& call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << " accepted an invalid argument";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), coilInvalidArgument) << what;
    }
  };
  const auto badType = static_cast<coilDataType_t>(coilNumTypes);
  const auto badOp = static_cast<coilRedOp_t>(coilNumOps);
  expectInvalid([&] { kernel(badType, coilSum); }, "kernel(type)");
  expectInvalid([&] { kernel(coilFloat32, badOp); }, "kernel(op)");
  expectInvalid([&] { kernel(static_cast<coilDataType_t>(-1), coilSum); }, "kernel(-1)");
  expectInvalid([&] { divider(badType); }, "divider");
  expectInvalid([&] { typeSize(badType); }, "typeSize");
  expectInvalid([&] { kernelFor(Isa::kGeneric, coilInt8, badOp); }, "kernelFor");
  EXPECT_STREQ(typeName(badType), "invalid-type");
  EXPECT_STREQ(opName(badOp), "invalid-op");
}

TEST(Dispatch, NamesAndSizes) {
  const char* names[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                         "uint64", "float16", "float32", "float64", "bfloat16"};
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  for (int t = 0; t < coilNumTypes; ++t) {
    EXPECT_STREQ(typeName(static_cast<coilDataType_t>(t)), names[t]);
    EXPECT_EQ(typeSize(static_cast<coilDataType_t>(t)), sizes[t]);
  }
  EXPECT_STREQ(opName(coilSum), "sum");
  EXPECT_STREQ(opName(coilProd), "prod");
  EXPECT_STREQ(opName(coilMax), "max");
  EXPECT_STREQ(opName(coilMin), "min");
  EXPECT_STREQ(opName(coilAvg), "avg");
  EXPECT_STREQ(opName(coilBand), "band");
  EXPECT_STREQ(opName(coilBor), "bor");
  EXPECT_STREQ(opName(coilBxor), "bxor");
}

TEST(Dispatch, BitwiseOpsTakeIntegerTypesOnly) {
  for (coilDataType_t type : kAllTypes)
    for (coilRedOp_t op : {coilBand, coilBor, coilBxor}) {
      const bool integer = type != coilFloat16 && type != coilFloat32 && type != coilFloat64 &&
                           type != coilBfloat16;
      EXPECT_EQ(takesType(op, type), integer) << typeName(type) << " " << opName(op);
      if (integer) continue;
      try {
        kernel(type, op);
        ADD_FAILURE() << "kernel(" << typeName(type) << ", " << opName(op) << ") was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), coilInvalidArgument);
        EXPECT_NE(std::string(e.what()).find(std::string("reduction op ") + opName(op) +
                                             " takes integer datatypes only, not " + typeName(type)),
                  std::string::npos)
            << e.what();
      }
    }
  for (coilDataType_t type : kAllTypes)
    for (coilRedOp_t op : {coilSum, coilProd, coilMax, coilMin, coilAvg})
      EXPECT_TRUE(takesType(op, type)) << typeName(type) << " " << opName(op);
}

TEST(Dispatch, EveryTableIsCompleteAndDistinct) {
  for (Isa isa : availableIsas()) {
    std::set<void*> seen;
    for (coilDataType_t type : kAllTypes) {
      for (Op kernelOp : testing::kAllOps) {
        if (!testing::hasKernel(type, kernelOp)) continue;
        const coilRedOp_t op = testing::redOpOf(kernelOp);
        ReduceFn fn = kernelFor(isa, type, op);
        ASSERT_NE(fn, nullptr) << isaName(isa) << " " << typeName(type) << " " << opName(op);
        EXPECT_TRUE(seen.insert(reinterpret_cast<void*>(fn)).second) << "shared entry " << typeName(type);
      }
      EXPECT_EQ(kernelFor(isa, type, coilAvg), kernelFor(isa, type, coilSum)) << "avg reduces with sum";
      ASSERT_NE(dividerFor(isa, type), nullptr);
    }
  }
}

/// The CPU flags as the kernel reports them, independent of __builtin_cpu_supports.
std::set<std::string> cpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> out;
    for (std::string w; words >> w;) out.insert(w);
    return out;
  }
  return {};
}

TEST(Dispatch, AvailableIsasFollowCpuFlags) {
  const auto flags = cpuFlags();
  if (flags.empty()) GTEST_SKIP() << "no x86 flags line in /proc/cpuinfo";
  const bool avx2 = flags.count("avx2") && flags.count("f16c");
  const bool avx512 = flags.count("avx512f") && flags.count("avx512bw") && flags.count("avx512dq") &&
                      flags.count("avx512vl");
  EXPECT_TRUE(isaAvailable(Isa::kGeneric));
  EXPECT_EQ(cpuSupports(Isa::kAvx2), avx2);
  EXPECT_EQ(cpuSupports(Isa::kAvx512), avx512);
  if (std::getenv("COIL_REDUCE_ISA") == nullptr) {
    const Isa best = availableIsas().back();
    EXPECT_EQ(activeIsaId(), best);
    EXPECT_STREQ(activeIsa(), isaName(best));
  }
  for (coilDataType_t type : kAllTypes)
    EXPECT_EQ(kernel(type, coilMax), kernelFor(activeIsaId(), type, coilMax));
}

// The choice is made once per process, so each case runs in a fresh one
// (threadsafe death-test style re-executes this binary for the statement).
class DispatchEnv : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(DispatchEnv, ForcedIsaIsUsed) {
  for (Isa isa : availableIsas()) {
    EXPECT_EXIT(
        {
          setenv("COIL_REDUCE_ISA", isaName(isa), 1);
          const bool ok = std::string(activeIsa()) == isaName(isa) &&
                          kernel(coilFloat16, coilSum) == kernelFor(isa, coilFloat16, coilSum);
          std::exit(ok ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << isaName(isa);
  }
}

TEST_F(DispatchEnv, UnknownIsaNameIsAnError) {
  EXPECT_EXIT(
      {
        setenv("COIL_REDUCE_ISA", "sse9", 1);
        try {
          activeIsa();
        } catch (const Error& e) {
          std::exit(e.code() == coilInvalidUsage && std::string(e.what()).find("sse9") != std::string::npos ? 0 : 2);
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(DispatchEnv, UnsupportedIsaFallsBackWithAWarning) {
  Isa missing = Isa::kGeneric;
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2})
    if (!isaAvailable(isa)) missing = isa;
  if (missing == Isa::kGeneric) GTEST_SKIP() << "every ISA runs on this machine";
  EXPECT_THROW(kernelFor(missing, coilFloat32, coilSum), Error);
  const std::string best = isaName(availableIsas().back());
  EXPECT_EXIT(
      {
        setenv("COIL_REDUCE_ISA", isaName(missing), 1);
        std::exit(std::string(activeIsa()) == best ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "cannot run here");
}

}  // namespace
}  // namespace coil::reduce
