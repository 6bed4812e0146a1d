#include "railyard/validate/threshold.h"

#include <gtest/gtest.h>

#include <cmath>

namespace railyard::validate {
namespace {

TEST(ThresholdTest, ParsesRelativeAndAbsoluteBounds) {
  Result<Threshold> t = ParseThreshold("80% of median", Unit::kRate);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->kind, Threshold::Kind::kOfMedian);
  EXPECT_DOUBLE_EQ(t->value, 0.8);
  t = ParseThreshold(" 90 % of expected ", Unit::kRate);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->kind, Threshold::Kind::kOfExpected);
  EXPECT_DOUBLE_EQ(t->value, 0.9);
  EXPECT_DOUBLE_EQ(ParseThreshold("200Mbit/s", Unit::kRate)->value, 200e6);
  EXPECT_DOUBLE_EQ(ParseThreshold("1KiB", Unit::kBytes)->value, 1024);
  EXPECT_TRUE(std::isinf(ParseThreshold("unlimited", Unit::kBytes)->value));
  EXPECT_DOUBLE_EQ(ParseThreshold("250ms", Unit::kDuration)->value, 0.25);
  EXPECT_DOUBLE_EQ(ParseThreshold("8", Unit::kCount)->value, 8);
}

TEST(ThresholdTest, RejectsWhatItCannotRead) {
  for (auto [text, unit] : {std::pair{"80% of mean", Unit::kRate},
                            {"x% of median", Unit::kRate},
                            {"2000% of median", Unit::kRate},
                            {"200", Unit::kRate},
                            {"fast", Unit::kCount},
                            {"-1", Unit::kCount},
                            {"1s", Unit::kNone}}) {
    Result<Threshold> t = ParseThreshold(text, unit);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(text), std::string::npos) << t.status().message();
  }
}

TEST(ThresholdTest, BreachesFollowTheDirectionAndTheReference) {
  Threshold t = *ParseThreshold("80% of median", Unit::kRate);
  EXPECT_TRUE(*Breaches(t, true, 70, {.median = 100}));
  EXPECT_FALSE(*Breaches(t, true, 80, {.median = 100}));  // equal passes
  EXPECT_FALSE(*Breaches(t, false, 70, {.median = 100}));
  Result<bool> no_ref = Breaches(t, true, 70, {.expected = 100});
  ASSERT_FALSE(no_ref.ok());
  EXPECT_EQ(no_ref.status().code(), StatusCode::kFailedPrecondition);
  Threshold e = *ParseThreshold("90% of expected", Unit::kRate);
  EXPECT_TRUE(*Breaches(e, true, 85, {.median = 50, .expected = 100}));
}

TEST(ThresholdTest, FormatsValuesInTheirUnit) {
  EXPECT_EQ(FormatValue(200e6, Unit::kRate), "200 Mbit/s");
  EXPECT_EQ(FormatValue(65536, Unit::kBytes), "64 KiB");
  EXPECT_EQ(FormatValue(INFINITY, Unit::kBytes), "unlimited");
  EXPECT_EQ(FormatValue(0.25, Unit::kDuration), "250ms");
  EXPECT_EQ(FormatValue(8, Unit::kCount), "8");
}

}  // namespace
}  // namespace railyard::validate
