// RunNodeChecks: every check gets a verdict, a hung check is UNKNOWN at its timeout and the
// run still finishes, skipped checks are never PASS; and the NHC one-line summary.
#include "railyard/validate/node_run.h"

#include <gtest/gtest.h>

#include <future>

#include "railyard/validate/node_env_testing.h"

namespace railyard::validate {
namespace {

// A node check whose Run returns a fixed outcome, or blocks until `release` is set.
class StubCheck final : public BasicCheck {
 public:
  StubCheck(std::string id, Outcome outcome, std::shared_future<void> release = {},
            Needs needs = {})
      : BasicCheck({.id = std::move(id),
                    .summary = "stub",
                    .category = Category::kNode,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(5),
                    .needs = needs}),
        outcome_(std::move(outcome)),
        release_(std::move(release)) {}
  Outcome Run(const CheckContext&) const override {
    if (release_.valid()) release_.wait();
    return outcome_;
  }

 private:
  Outcome outcome_;
  std::shared_future<void> release_;
};

class NodeRunTest : public ::testing::Test {
 protected:
  Plan MakePlan(std::string_view extra = "") {
    std::string yaml = "version: 1\nname: t\ninclude: quick\n" + std::string(extra);
    Result<Plan> plan = ParsePlan(yaml, "t.yaml", registry_);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return plan.ok() ? *plan : Plan{};
  }
  CheckRegistry registry_;
  std::shared_ptr<NodeEnv> env_ = std::make_shared<FakeNodeEnv>();
};

TEST_F(NodeRunTest, EveryCheckGetsAVerdictAndTheWorstDecides) {
  ASSERT_TRUE(
      registry_.Register(std::make_unique<StubCheck>("node.a", Outcome::Pass("fine"))).ok());
  ASSERT_TRUE(registry_.Register(std::make_unique<StubCheck>("node.b", Outcome::Warn("meh"))).ok());
  ASSERT_TRUE(
      registry_
          .Register(std::make_unique<StubCheck>("node.gpuish", Outcome::Pass("never"),
                                                std::shared_future<void>{}, Needs{.gpu = true}))
          .ok());
  NodeReport r = RunNodeChecks(MakePlan(), "node1", Profile{.name = "cpu", .gpus = 0}, env_, {});
  ASSERT_EQ(r.checks.size(), 3u);
  EXPECT_EQ(r.checks[0].outcome.ToString(), "PASS: fine");
  EXPECT_EQ(r.checks[1].outcome.ToString(), "WARN: meh");
  EXPECT_EQ(r.checks[2].outcome.ToString(), "SKIPPED: no GPU expected on profile cpu");
  EXPECT_EQ(r.overall.verdict, Verdict::kWarn);
  EXPECT_EQ(OneLineSummary(r), "railyard: node.b WARN: meh");
}

TEST_F(NodeRunTest, AHungCheckIsUnknownAtItsTimeoutAndTheRunFinishes) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_TRUE(
      registry_.Register(std::make_unique<StubCheck>("node.a", Outcome::Pass("fine"))).ok());
  ASSERT_TRUE(
      registry_.Register(std::make_unique<StubCheck>("node.hang", Outcome::Pass("late"), released))
          .ok());
  Plan plan = MakePlan("checks:\n  - {id: node.hang, timeout: 50ms}\n");
  NodeReport r = RunNodeChecks(plan, "node1", Profile{}, env_, {});
  release.set_value();  // lets the abandoned thread end before the registry goes
  ASSERT_EQ(r.checks.size(), 2u);
  EXPECT_EQ(r.checks[0].outcome.verdict, Verdict::kPass);
  EXPECT_EQ(r.checks[1].outcome.ToString(), "UNKNOWN: did not finish within 50 ms (its timeout)");
  EXPECT_EQ(r.overall.verdict, Verdict::kUnknown);
  EXPECT_EQ(r.abandoned, 1);
  EXPECT_EQ(OneLineSummary(r),
            "railyard: node.hang UNKNOWN: did not finish within 50 ms (its timeout)");
}

TEST_F(NodeRunTest, ChecksLimitedToOtherProfilesAreSkippedNotPassed) {
  ASSERT_TRUE(
      registry_.Register(std::make_unique<StubCheck>("node.a", Outcome::Pass("fine"))).ok());
  Plan plan = MakePlan(
      "profiles:\n  - {name: gpu, hosts: \"gpu[1-2]\"}\n  - {name: cpu}\n"
      "checks:\n  - {id: node.a, profiles: [gpu]}\n");
  NodeReport r = RunNodeChecks(plan, "node1", plan.ProfileFor("node1"), env_, {});
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].outcome.ToString(), "SKIPPED: plan t runs it on profiles gpu only");
  EXPECT_EQ(r.overall.verdict, Verdict::kSkipped);
  EXPECT_EQ(OneLineSummary(r), "railyard: node1 OK: 0 passed, 1 skipped");
}

TEST_F(NodeRunTest, OtherCategoriesAreLeftOut) {
  ASSERT_TRUE(registry_.Register(std::make_unique<StubCheck>("node.a", Outcome::Fail("bad"))).ok());
  NodeReport r =
      RunNodeChecks(MakePlan(), "node1", Profile{}, env_, {.categories = {Category::kGpu}});
  EXPECT_TRUE(r.checks.empty());
  EXPECT_EQ(r.overall.ToString(), "SKIPPED: nothing ran");
}

}  // namespace
}  // namespace railyard::validate
