// printableText (core/printable.h): what a peer's text may become before
// it is shown to the user.
#include <gtest/gtest.h>

#include <string>

#include "core/printable.h"

namespace coil {
namespace {

std::string printable(const std::string& s, size_t max = 512) {
  return printableText(s.data(), s.size(), max);
}

TEST(Printable, PlainTextIsKept) {
  EXPECT_EQ(printable("rank 3 joined twice (from 10.0.0.1:5 and 10.0.0.2:6)"),
            "rank 3 joined twice (from 10.0.0.1:5 and 10.0.0.2:6)");
  EXPECT_EQ(printable(""), "");
}

TEST(Printable, EveryOtherByteIsSpelledOut) {
  EXPECT_EQ(printable("a\x1b[2J\r\nb"), "a\\x1b[2J\\x0d\\x0ab");
  EXPECT_EQ(printable(std::string("nul\0!", 5)), "nul\\x00!");
  EXPECT_EQ(printable("\xc3\xa9\xff\x7f"), "\\xc3\\xa9\\xff\\x7f");
  EXPECT_EQ(printable("C:\\x41"), "C:\\x5cx41");  // a literal backslash cannot fake an escape
}

TEST(Printable, LongTextIsCutWithinTheBound) {
  const std::string text(100000, 'x');
  const std::string out = printable(text, 512);
  EXPECT_LE(out.size(), 512u);
  EXPECT_EQ(out.substr(0, 10), "xxxxxxxxxx");
  EXPECT_NE(out.find("... (100000 bytes)"), std::string::npos) << out;
}

TEST(Printable, ACutNeverSplitsAnEscape) {
  for (size_t max = 32; max < 80; ++max) {
    const std::string out = printable(std::string(200, '\x1b'), max);
    EXPECT_LE(out.size(), max);
    const std::string body = out.substr(0, out.find("..."));
    EXPECT_EQ(body.size() % 4, 0u) << out;
  }
}

TEST(Printable, TextThatFitsExactlyIsNotCut) {
  EXPECT_EQ(printable(std::string(40, 'y'), 40), std::string(40, 'y'));
}

}  // namespace
}  // namespace coil
