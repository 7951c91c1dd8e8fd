// discover() and fromXml() when coil is built without hwloc
// (topology_absent.cc): what /sys gives, and a clear reason for the rest.
// Built only without hwloc (topology_xml_test.cc otherwise).
#include <gtest/gtest.h>

#include "core/error.h"
#include "topo/topology.h"

namespace coil::topo {
namespace {

TEST(TopologyAbsent, DiscoverSaysHwlocIsMissing) {
  const Topology t = discover();
  EXPECT_GE(t.pus, 1);
  EXPECT_FALSE(t.pciKnown);
  ASSERT_FALSE(t.missing.empty());
  EXPECT_NE(t.missing[0].find("hwloc not available at build time"), std::string::npos)
      << describeMissing(t);
}

TEST(TopologyAbsent, FromXmlFailsClearly) {
  try {
    fromXml("x.xml");
    FAIL() << "expected coil::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.xml"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("hwloc not available at build time"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace coil::topo
