#include "railyard/base/strings.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

namespace railyard::base {
namespace {

TEST(StringsTest, StripAsciiWhitespaceBothEnds) {
  EXPECT_EQ(StripAsciiWhitespace(" \t\r\n a b \v\f\n"), "a b");
  EXPECT_EQ(StripAsciiWhitespace("ab"), "ab");
  EXPECT_EQ(StripAsciiWhitespace(""), "");
  EXPECT_EQ(StripAsciiWhitespace(" \t\n "), "");
}

TEST(StringsTest, StripOneSide) {
  EXPECT_EQ(StripLeadingAsciiWhitespace("  x  "), "x  ");
  EXPECT_EQ(StripTrailingAsciiWhitespace("  x  "), "  x");
  EXPECT_EQ(StripLeadingAsciiWhitespace("   "), "");
  EXPECT_EQ(StripTrailingAsciiWhitespace("   "), "");
}

TEST(StringsTest, WhitespaceIsWhatIsspaceAccepts) {
  for (int c = 0; c < 128; ++c) {
    std::string s(1, static_cast<char>(c));
    EXPECT_EQ(StripAsciiWhitespace(s).empty(), std::isspace(c) != 0) << "character " << c;
  }
}

TEST(StringsTest, StripCharsKeepsOthers) {
  // HTTP's optional whitespace is space and tab only: a stray CR stays visible.
  EXPECT_EQ(StripChars(" \tclose\r \t", " \t"), "close\r");
  EXPECT_EQ(StripChars("--x--", "-"), "x");
  EXPECT_EQ(StripChars("x", ""), "x");
}

TEST(StringsTest, ResultIsAViewIntoTheInput) {
  std::string text = "  value  ";
  std::string_view v = StripAsciiWhitespace(text);
  EXPECT_EQ(v.data(), text.data() + 2);
}

TEST(StringsTest, WhereNamesTheLineWhenKnown) {
  EXPECT_EQ(Where("topology.conf", 12), "topology.conf:12");
  EXPECT_EQ(Where("topology.conf", 0), "topology.conf");
  EXPECT_EQ(Where("<stdin>", -1), "<stdin>");
}

}  // namespace
}  // namespace railyard::base
