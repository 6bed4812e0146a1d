#include "railyard/validate/verdict.h"

#include <gtest/gtest.h>

#include <vector>

namespace railyard::validate {
namespace {

TEST(VerdictTest, NamesAndNagiosExitCodes) {
  EXPECT_EQ(VerdictName(Verdict::kPass), "PASS");
  EXPECT_EQ(VerdictName(Verdict::kSkipped), "SKIPPED");
  EXPECT_EQ(VerdictExitCode(Verdict::kPass), 0);
  EXPECT_EQ(VerdictExitCode(Verdict::kSkipped), 0);
  EXPECT_EQ(VerdictExitCode(Verdict::kWarn), 1);
  EXPECT_EQ(VerdictExitCode(Verdict::kFail), 2);
  EXPECT_EQ(VerdictExitCode(Verdict::kUnknown), 3);
}

TEST(VerdictTest, FailOutranksEverythingAndSkipHidesNothing) {
  EXPECT_EQ(WorseOf(Verdict::kSkipped, Verdict::kFail), Verdict::kFail);
  EXPECT_EQ(WorseOf(Verdict::kFail, Verdict::kSkipped), Verdict::kFail);
  EXPECT_EQ(WorseOf(Verdict::kUnknown, Verdict::kFail), Verdict::kFail);
  EXPECT_EQ(WorseOf(Verdict::kWarn, Verdict::kUnknown), Verdict::kUnknown);
  EXPECT_EQ(WorseOf(Verdict::kPass, Verdict::kWarn), Verdict::kWarn);
  EXPECT_EQ(WorseOf(Verdict::kSkipped, Verdict::kPass), Verdict::kPass);
}

TEST(VerdictTest, WorstKeepsTheFirstReasonAndCountsTheRest) {
  Outcome o = Worst({Outcome::Pass("a"), Outcome::Fail("memlock 64 KiB"), Outcome::Skipped("x"),
                     Outcome::Fail("swap"), Outcome::Unknown("timed out")});
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_EQ(o.ToString(), "FAIL: memlock 64 KiB (+1 more)");
  EXPECT_EQ(o.ExitCode(), 2);
}

TEST(VerdictTest, NothingIsPassThatDidNotRun) {
  EXPECT_EQ(Worst(std::vector<Outcome>{}).ToString(), "SKIPPED: nothing ran");
  Outcome skips = Worst({Outcome::Skipped("no GPU expected on profile cpu"),
                         Outcome::Skipped("nccl-tests not installed")});
  EXPECT_EQ(skips.verdict, Verdict::kSkipped);
  EXPECT_EQ(Worst({Outcome::Skipped("no GPU"), Outcome::Pass()}).verdict, Verdict::kPass);
  EXPECT_EQ(Outcome::Pass().ToString(), "PASS");
}

}  // namespace
}  // namespace railyard::validate
