// The nvidia-smi-style path names between two PCI devices, from where they sit.
#include "topo/pci_path.h"

#include <gtest/gtest.h>

namespace coil::topo {
namespace {

PciLocation at(std::string busId, int numaNode, std::vector<std::string> bridges) {
  return PciLocation{std::move(busId), std::move(bridges), numaNode, {}};
}

// A host bridge, a root port, a switch (upstream port, two downstream ports).
const std::vector<std::string> kSwitchSlot1 = {"host 0000:[17-1b]", "bridge 0000:17:01.0",
                                               "bridge 0000:18:00.0", "bridge 0000:19:00.0"};
const std::vector<std::string> kSwitchSlot2 = {"host 0000:[17-1b]", "bridge 0000:17:01.0",
                                               "bridge 0000:18:00.0", "bridge 0000:19:01.0"};

TEST(PciPath, SameDeviceIsX) {
  const PciLocation gpu = at("0000:1a:00.0", 0, kSwitchSlot1);
  EXPECT_EQ(pathBetween(gpu, gpu), PciPath::kSelf);
}

TEST(PciPath, BehindOneSwitchIsPix) {
  EXPECT_EQ(pathBetween(at("0000:1a:00.0", 0, kSwitchSlot1), at("0000:1b:00.0", 0, kSwitchSlot2)),
            PciPath::kPix);
  // Two functions behind the same downstream port.
  EXPECT_EQ(pathBetween(at("0000:1a:00.0", 0, kSwitchSlot1), at("0000:1a:00.1", 0, kSwitchSlot1)),
            PciPath::kPix);
}

TEST(PciPath, BehindTwoSwitchesUnderOneRootPortIsPxb) {
  const std::vector<std::string> otherSwitch = {"host 0000:[17-1b]", "bridge 0000:17:01.0",
                                                "bridge 0000:18:01.0", "bridge 0000:1c:00.0"};
  EXPECT_EQ(pathBetween(at("0000:1a:00.0", 0, kSwitchSlot1), at("0000:1d:00.0", 0, otherSwitch)),
            PciPath::kPxb);
}

TEST(PciPath, UnderOneHostBridgeIsPhb) {
  const PciLocation nvme = at("0000:17:02.0", 0, {"host 0000:[17-1b]"});
  EXPECT_EQ(pathBetween(at("0000:1a:00.0", 0, kSwitchSlot1), nvme), PciPath::kPhb);
  // The virtual machine's case: both straight under the one host bridge.
  EXPECT_EQ(pathBetween(at("0000:00:02.0", 0, {"host 0000:[00-00]"}),
                        at("0000:00:03.0", 0, {"host 0000:[00-00]"})),
            PciPath::kPhb);
}

TEST(PciPath, OtherHostBridgeOfTheNodeIsNode) {
  EXPECT_EQ(pathBetween(at("0000:1a:00.0", 0, kSwitchSlot1),
                        at("0000:31:00.0", 0, {"host 0000:[30-31]", "bridge 0000:30:01.0"})),
            PciPath::kNode);
}

TEST(PciPath, OtherNodeOrUnknownNodeIsSys) {
  const PciLocation gpu = at("0000:1a:00.0", 0, kSwitchSlot1);
  EXPECT_EQ(pathBetween(gpu, at("0000:ca:00.0", 1, {"host 0000:[ca-ca]"})), PciPath::kSys);
  EXPECT_EQ(pathBetween(gpu, at("0000:ca:00.0", -1, {"host 0000:[ca-ca]"})), PciPath::kSys);
}

TEST(PciPath, NamesAndMeanings) {
  EXPECT_STREQ(pathName(PciPath::kSelf), "X");
  EXPECT_STREQ(pathName(PciPath::kPix), "PIX");
  EXPECT_STREQ(pathName(PciPath::kPxb), "PXB");
  EXPECT_STREQ(pathName(PciPath::kPhb), "PHB");
  EXPECT_STREQ(pathName(PciPath::kNode), "NODE");
  EXPECT_STREQ(pathName(PciPath::kSys), "SYS");
  EXPECT_NE(std::string(pathMeaning(PciPath::kSys)).find("NUMA"), std::string::npos);
}

}  // namespace
}  // namespace coil::topo
