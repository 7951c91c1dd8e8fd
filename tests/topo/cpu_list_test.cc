// CPU lists in the kernel's text form, both ways.
#include "topo/cpu_list.h"

#include <gtest/gtest.h>

namespace coil::topo {
namespace {

using Cpus = std::vector<unsigned>;

TEST(CpuList, FormatsRuns) {
  EXPECT_EQ(formatCpuList({}), "");
  EXPECT_EQ(formatCpuList({5}), "5");
  EXPECT_EQ(formatCpuList({0, 1}), "0-1");
  EXPECT_EQ(formatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

TEST(CpuList, ParsesWhatSysfsWrites) {
  EXPECT_EQ(parseCpuList("0-3,8,10-11\n"), (Cpus{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parseCpuList("7"), (Cpus{7}));
  EXPECT_EQ(parseCpuList(""), Cpus{}) << "a memory-only NUMA node has an empty cpulist";
  EXPECT_EQ(parseCpuList("\n"), Cpus{});
  EXPECT_EQ(parseCpuList("3,1-2,2"), (Cpus{1, 2, 3})) << "sorted, duplicates dropped";
}

TEST(CpuList, RejectsWhatIsNotAList) {
  for (const char* bad : {"a", "3-1", "1,", ",1", "1--2", "1 2", "0-99999999", "-1"})
    EXPECT_FALSE(parseCpuList(bad)) << bad;
}

TEST(CpuList, RoundTrip) {
  const Cpus cpus{0, 2, 3, 4, 63, 64, 65, 127};
  EXPECT_EQ(parseCpuList(formatCpuList(cpus)), cpus);
}

}  // namespace
}  // namespace coil::topo
