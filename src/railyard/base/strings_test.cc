#include "railyard/base/strings.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

namespace railyard::base {
namespace {

TEST(StringsTest, SplitLinesKeepsInnerEmptyLinesAndDropsTheFinalNewline) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(SplitLines("a\nb\n"), (V{"a", "b"}));
  EXPECT_EQ(SplitLines("a\nb"), (V{"a", "b"}));
  EXPECT_EQ(SplitLines("a\n\nc"), (V{"a", "", "c"}));
  EXPECT_EQ(SplitLines(""), V{});
  EXPECT_EQ(SplitLines("\n"), (V{""}));
  std::string_view text = "x\ny";
  EXPECT_EQ(SplitLines(text)[1].data(), text.data() + 2);  // a view, not a copy
}

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

TEST(StringsTest, SplitHostPort) {
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(SplitHostPort("198.18.0.2:5201", &host, &port).ok());
  EXPECT_EQ(host, "198.18.0.2");
  EXPECT_EQ(port, 5201);
  ASSERT_TRUE(SplitHostPort("store-host:0", &host, &port).ok());
  EXPECT_EQ(host, "store-host");
  EXPECT_EQ(port, 0);
}

TEST(StringsTest, SplitHostPortRejectsWithTheText) {
  std::string host = "kept";
  uint16_t port = 7;
  for (std::string_view bad : {"198.18.0.2", ":80", "h:", "h:8x", "h:-1", "h:99999", "h: 80"}) {
    Status s = SplitHostPort(bad, &host, &port);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(std::string(bad)), std::string::npos) << s.message();
  }
  EXPECT_EQ(host, "kept");
  EXPECT_EQ(port, 7);
}

TEST(StringsTest, XmlEscapeTheFiveSpecialCharacters) {
  EXPECT_EQ(XmlEscape(R"(a&b<c>d"e'f)"), "a&amp;b&lt;c&gt;d&quot;e&apos;f");
  EXPECT_EQ(XmlEscape("&amp;"), "&amp;amp;");  // already escaped text is escaped again
  EXPECT_EQ(XmlEscape("plain 1.0 GT/s"), "plain 1.0 GT/s");
  EXPECT_EQ(XmlEscape(""), "");
}

TEST(StringsTest, XmlEscapeReplacesControlCharactersButTabNewlineReturn) {
  constexpr std::string_view kControls("a\1b\37c\0d", 7);  // \1, \37 (0x1f), NUL
  EXPECT_EQ(XmlEscape(kControls), "a?b?c?d");
  EXPECT_EQ(XmlEscape("a\tb\nc\rd"), "a\tb\nc\rd");
  EXPECT_EQ(XmlEscape("\x7f \xc3\xa9"), "\x7f \xc3\xa9");  // DEL and UTF-8 bytes are kept
}

}  // namespace
}  // namespace railyard::base
