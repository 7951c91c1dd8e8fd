// firstSlurmHost: the first host of a Slurm host list ("node[01-04,07],gpu5"),
// as Slurm writes SLURM_STEP_NODELIST, with its zero padding kept.
#include "bootstrap/slurm_nodelist.h"

#include <gtest/gtest.h>

#include <utility>

#include "core/error.h"
#include "test_util.h"

namespace coil {
namespace {

TEST(SlurmNodelist, FirstHost) {
  const std::pair<const char*, const char*> cases[] = {
      {"vm", "vm"},
      {"a1,b2", "a1"},
      {"node[01-04,07],gpu5", "node01"},
      {"node[7,3-4]", "node7"},
      {"node[001-002]-ib", "node001-ib"},
      {"rack[2-3]n[10-11],x", "rack2n10"},
      {"[5-6]", "5"},
      {"gpu-a.cluster.org,gpu-b", "gpu-a.cluster.org"},
  };
  for (const auto& [list, first] : cases) EXPECT_EQ(firstSlurmHost(list), first) << list;
}

TEST(SlurmNodelist, MalformedListsAreRefusedWithTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "an empty host list"},
      {",node1", "an empty host name at the start"},
      {"node[1-", "'[' without its ']'"},
      {"node[]", "an empty range '[]'"},
      {"node[a-b]", "a range that is not numbers: '[a-b]'"},
      {"node[3-1]", "a range that runs backwards: '[3-1]'"},
      {"node1]", "']' without its '['"},
      {"node[1[2]]", "'[' inside a range"},
  };
  for (const auto& [list, why] : cases) {
    const char* text = list;  // clang 14 lambdas cannot capture a structured binding
    EXPECT_EQ(test::messageOf([text] { firstSlurmHost(text); }, coilInvalidUsage), why) << text;
  }
}

}  // namespace
}  // namespace coil
