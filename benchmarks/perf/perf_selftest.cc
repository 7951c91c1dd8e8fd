// Self-tests of coil_perf's own logic (no coil calls): size parsing and
// sweeps, the type/op tables, the command line, fp16/bf16 rounding, and the
// result checker against an independent reference reduction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "check.h"
#include "dtypes.h"
#include "options.h"
#include "selftest_reference.h"
#include "units.h"

namespace coil_perf {
namespace {

TEST(Units, ParsesSizesWithBinarySuffixes) {
  EXPECT_EQ(parseBytes("8", "-b"), 8u);
  EXPECT_EQ(parseBytes("64K", "-b"), 64u << 10);
  EXPECT_EQ(parseBytes("64M", "-b"), 64u << 20);
  EXPECT_EQ(parseBytes("1G", "-b"), size_t{1} << 30);
  EXPECT_EQ(parseBytes("4KiB", "-b"), 4096u);
  for (const char* bad : {"", "-1", "8X", "K", "1.5M", "99999999999999999999G", "18446744073709551615G"}) {
    EXPECT_THROW(parseBytes(bad, "-b"), UsageError) << bad;
  }
}

TEST(Units, SweepsByFactorAndByStep) {
  const auto geometric = sweepSizes(8, 64u << 20, 4, 0);
  ASSERT_EQ(geometric.size(), 12u);  // 8 * 4^11 = 32 MiB is the last <= 64 MiB
  EXPECT_EQ(geometric.front(), 8u);
  EXPECT_EQ(geometric.back(), 32u << 20);
  EXPECT_EQ(sweepSizes(8, 40, 2, 8), (std::vector<size_t>{8, 16, 24, 32, 40}));
  EXPECT_EQ(sweepSizes(0, 4, 2, 0), (std::vector<size_t>{0, 1, 2, 4}));
  EXPECT_EQ(sweepSizes(100, 100, 2, 0), (std::vector<size_t>{100}));
  EXPECT_THROW(sweepSizes(16, 8, 2, 0), UsageError);
  EXPECT_THROW(sweepSizes(8, 16, 1.0, 0), UsageError);
}

TEST(Dtypes, NamesAliasesAndLists) {
  EXPECT_EQ(allTypes().size(), 10u);
  EXPECT_EQ(allOps().size(), 8u);
  EXPECT_EQ(parseTypes("all").size(), 10u);
  EXPECT_EQ(parseTypes("bf16").at(0).type, coilBfloat16);
  EXPECT_EQ(parseTypes("fp16").at(0).type, coilFloat16);
  const auto list = parseTypes("float,int8,uint64");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[1].type, coilInt8);
  EXPECT_EQ(parseOps("sum,avg").at(1).op, coilAvg);
  EXPECT_THROW(parseTypes("float,nope"), UsageError);
  EXPECT_THROW(parseOps("mean"), UsageError);
  for (const TypeInfo& t : allTypes()) EXPECT_STREQ(typeInfo(t.type).name, t.name);
}

Options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "coil_perf");
  return parseOptions(static_cast<int>(args.size()), const_cast<char**>(args.data()));
}

TEST(Options, DefaultsMatchNcclTests) {
  const Options o = parse({});
  EXPECT_EQ(o.minBytes, 8u);
  EXPECT_EQ(o.maxBytes, 64u << 20);
  EXPECT_EQ(o.factor, 2.0);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup, 5);
  EXPECT_TRUE(o.check());
  ASSERT_EQ(o.types.size(), 1u);
  EXPECT_EQ(o.types[0].type, coilFloat32);
  EXPECT_EQ(o.ops[0].op, coilSum);
  EXPECT_EQ(o.nprocs, 0);
}

TEST(Options, ShortLongAndJoinedForms) {
  const Options o = parse({"-b", "1K", "-e1M", "--stepfactor=4", "-n", "3", "-w", "0", "-c", "0",
                           "-d", "half", "-o", "avg", "-P", "3", "--transport", "tcp",
                           "--json=out.json", "--baseline", "mpi"});
  EXPECT_EQ(o.minBytes, 1024u);
  EXPECT_EQ(o.maxBytes, 1u << 20);
  EXPECT_EQ(o.factor, 4.0);
  EXPECT_EQ(o.iters, 3);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_FALSE(o.check());
  EXPECT_EQ(o.types[0].type, coilFloat16);
  EXPECT_EQ(o.ops[0].op, coilAvg);
  EXPECT_EQ(o.nprocs, 3);
  EXPECT_EQ(o.transport, "tcp");
  EXPECT_EQ(o.jsonPath, "out.json");
  EXPECT_TRUE(o.baselineMpi);
  EXPECT_TRUE(parse({"-h"}).help);
}

TEST(Options, RejectsMistakes) {
  for (std::vector<const char*> bad : std::vector<std::vector<const char*>>{
           {"-x"}, {"-b"}, {"-n", "0"}, {"-c", "x"}, {"-f", "1"}, {"--transport", "in/valid"},
           {"--baseline", "nccl"}, {"-b", "1M", "-e", "1K"}, {"--help=1"}, {"stray"}}) {
    EXPECT_THROW(parse(bad), UsageError) << bad[0];
  }
}

TEST(Options, CollectivesRootsAndModelTools) {
  const Options defaults = parse({});
  ASSERT_EQ(defaults.collectives.size(), 1u);
  EXPECT_EQ(defaults.collectives[0].id, Collective::AllReduce);
  EXPECT_EQ(defaults.root, 0);
  EXPECT_FALSE(defaults.allRoots);
  EXPECT_EQ(parse({"-C", "all"}).collectives.size(), 9u);
  const Options o = parse({"-C", "broadcast,sendrecv", "-r", "2", "--calibrate", "cal.txt",
                           "--predict"});
  ASSERT_EQ(o.collectives.size(), 2u);
  EXPECT_EQ(o.collectives[1].id, Collective::SendRecv);
  EXPECT_EQ(o.root, 2);
  EXPECT_EQ(o.calibratePath, "cal.txt");
  EXPECT_TRUE(o.predict);
  EXPECT_TRUE(parse({"-r", "all"}).allRoots);
  EXPECT_EQ(parse({"--predict", "--model", "m.txt"}).modelPath, "m.txt");
  for (std::vector<const char*> bad : std::vector<std::vector<const char*>>{
           {"-C", "bcast"}, {"-C", "allreduce,"}, {"-r", "-1"}, {"-r", "x"}, {"--predict"},
           {"--model", "m.txt"}, {"--calibrate"}, {"--predict=1"}}) {
    EXPECT_THROW(parse(bad), UsageError) << bad[0] << " " << bad.back();
  }
}

TEST(Rounding, HalfAndBfloat16RoundToNearestEven) {
  EXPECT_EQ(floatToHalfBits(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalfBits(-2.5f), 0xC100);
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalfBits(65520.0f), 0x7C00);                 // rounds up to infinity
  EXPECT_EQ(floatToHalfBits(1.00048828125f), 0x3C00);          // tie, even stays
  EXPECT_EQ(floatToHalfBits(1.00146484375f), 0x3C02);          // tie, rounds to even
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);   // smallest subnormal
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);   // tie to even zero
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -14)), 0x0400);   // smallest normal
  EXPECT_EQ(floatToHalfBits(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(floatToBf16Bits(1.0f), 0x3F80);
  EXPECT_EQ(floatToBf16Bits(1.0f / 3.0f), 0x3EAB);
  EXPECT_EQ(floatToBf16Bits(1.00390625f), 0x3F80);             // tie, even stays
  EXPECT_EQ(floatToBf16Bits(1.01171875f), 0x3F82);             // tie, rounds to even
}

TEST(Checker, AgreesWithAReferenceReductionAndCatchesOneFlippedBit) {
  constexpr size_t kCount = 777;
  for (int n : {1, 2, 3, 4, 7, 8, 16}) {
    for (const TypeInfo& t : allTypes()) {
      for (const OpInfo& o : allOps()) {
        if (!opTakesType(o, t)) continue;
        SCOPED_TRACE(std::string(t.name) + " " + o.name + " n=" + std::to_string(n));
        std::vector<std::vector<unsigned char>> in(n, std::vector<unsigned char>(kCount * t.size));
        for (int r = 0; r < n; ++r) fillInput(in[r].data(), kCount, t, o.op, r, n);
        std::vector<unsigned char> out(kCount * t.size);
        for (size_t i = 0; i < kCount; ++i) {
          reference::reduceElement([&](int r) { return &in[r][i * t.size]; }, n, t, o.op,
                                   &out[i * t.size]);
        }
        EXPECT_EQ(countWrong(out.data(), kCount, t, o.op, n).count, 0u);
        out[123 * t.size] ^= 1;
        const WrongReport w = countWrong(out.data(), kCount, t, o.op, n);
        EXPECT_EQ(w.count, 1u);
        EXPECT_EQ(w.firstIndex, 123u);
        poison(out.data(), kCount, t);
        EXPECT_EQ(countWrong(out.data(), kCount, t, o.op, n).count, kCount);
      }
    }
  }
}

TEST(Checker, InputsDifferAcrossRanksAndNeighbouringElements) {
  const TypeInfo& t = typeInfo(coilInt32);
  std::vector<int32_t> a(64), b(64);
  fillInput(a.data(), a.size(), t, coilSum, 0, 4);
  fillInput(b.data(), b.size(), t, coilSum, 1, 4);
  EXPECT_NE(a, b);
  // A chunk shifted by a few elements must not look the same.
  EXPECT_FALSE(std::equal(a.begin(), a.begin() + 32, a.begin() + 8));
}

}  // namespace
}  // namespace coil_perf
