#include "railyard/http/json_body.h"

#include <gtest/gtest.h>

namespace railyard::http {
namespace {

TEST(JsonBodyTest, DepthCountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(JsonNestingDepth("1", 64), 0);
  EXPECT_EQ(JsonNestingDepth("[]", 64), 1);
  EXPECT_EQ(JsonNestingDepth(R"({"a":[{"b":[]}],"c":{}})", 64), 4);
  // Brackets inside strings, also after escaped quotes and backslashes, do not count.
  EXPECT_EQ(JsonNestingDepth(R"(["[[[[", "\"[[[[", "\\", "{{{"])", 64), 1);
  EXPECT_EQ(JsonNestingDepth(R"(["\\\"[[["])", 64), 1);
  // Scanning stops as soon as the limit is passed.
  EXPECT_EQ(JsonNestingDepth(std::string(1000, '['), 10), 11);
  EXPECT_EQ(JsonNestingDepth(std::string(10, '[') + std::string(10, ']'), 10), 10);
}

TEST(JsonBodyTest, ParseRefusesDeepBodiesBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto r = ParseJsonBody(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("deeper than 64 levels"), std::string::npos);
  EXPECT_TRUE(ParseJsonBody(std::string(64, '[') + std::string(64, ']')).ok());
  EXPECT_FALSE(ParseJsonBody(std::string(65, '[') + std::string(65, ']')).ok());
}

TEST(JsonBodyTest, MalformedBodiesAreInvalidArgumentsNamingTheProblem) {
  for (const char* bad : {"", "{", "[1,]", "nul", "{\"a\":1}x", "\"\\ud800\"", "1e999999"}) {
    auto r = ParseJsonBody(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("not valid JSON"), std::string::npos) << bad;
  }
}

TEST(JsonBodyTest, DumpNeverThrowsOnInvalidUtf8) {
  nlohmann::json j = {{"Error", std::string("bad \xff byte")}};
  EXPECT_NO_THROW(DumpJson(j));
  EXPECT_NE(DumpJson(j).find("bad "), std::string::npos);
}

}  // namespace
}  // namespace railyard::http
