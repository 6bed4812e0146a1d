#include "railyard/validate/check.h"

#include <gtest/gtest.h>

namespace railyard::validate {
namespace {

TEST(CheckTest, CategoryAndCostNamesRoundTrip) {
  for (Category c : {Category::kNode, Category::kFabric, Category::kCollective, Category::kStorage,
                     Category::kGpu}) {
    EXPECT_EQ(*ParseCategory(CategoryName(c)), c);
  }
  for (Cost c : {Cost::kQuick, Cost::kFull, Cost::kInvasive}) EXPECT_EQ(*ParseCost(CostName(c)), c);
  EXPECT_EQ(ParseCost("cheap").status().message(),
            "unknown cost 'cheap' (expected one of: quick, full, invasive)");
}

TEST(CheckTest, GateSkipsWithTheReason) {
  CheckInfo gpu{.id = "gpu.count", .category = Category::kGpu};
  gpu.needs.gpu = true;
  Profile cpu{.name = "cpu", .gpus = 0};
  std::optional<Outcome> o = Gate(gpu, cpu, {});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->ToString(), "SKIPPED: no GPU expected on profile cpu");
  EXPECT_FALSE(Gate(gpu, Profile{.name = "gpu", .gpus = 8}, {}));
  EXPECT_EQ(Gate(gpu, Profile{.name = "default"}, {})->reason,
            "profile default does not say how many GPUs to expect (set gpus in the plan, or give "
            "the topology)");

  CheckInfo root{.id = "node.kernel"};
  root.needs.root = true;
  EXPECT_EQ(Gate(root, cpu, {.root = false})->reason, "needs root");
  EXPECT_FALSE(Gate(root, cpu, {.root = true}));

  CheckInfo storage{.id = "storage.write", .category = Category::kStorage};
  storage.needs.shared_dir = true;
  EXPECT_EQ(Gate(storage, cpu, {})->verdict, Verdict::kSkipped);

  CheckInfo fabric{.id = "fabric.pair_bandwidth", .category = Category::kFabric};
  fabric.needs.fabric_provider = true;
  Profile tcp{.name = "dev", .rdma = false};
  EXPECT_EQ(Gate(fabric, tcp, {})->reason, "no fabric provider expected on profile dev");
}

TEST(CheckTest, JudgeAppliesFailThenWarn) {
  CheckInfo info{.id = "fabric.x",
                 .unit = Unit::kRate,
                 .default_warn = "90% of expected",
                 .default_fail = "50% of expected"};
  CheckSettings s = *DefaultSettings(info);
  References refs{.expected = 200e6};
  EXPECT_EQ(Judge(info, s, 190e6, "rate 190 Mbit/s", refs).verdict, Verdict::kPass);
  EXPECT_EQ(Judge(info, s, 150e6, "rate", refs).ToString(),
            "WARN: rate, below warn limit 180 Mbit/s (90% of expected)");
  EXPECT_EQ(Judge(info, s, 40e6, "rate", refs).ToString(),
            "FAIL: rate, below fail limit 100 Mbit/s (50% of expected)");
  // No expectation to compare with: could not decide, never PASS.
  EXPECT_EQ(Judge(info, s, 40e6, "rate", {}).verdict, Verdict::kUnknown);
}

TEST(CheckTest, DefaultSettingsFillParamsAndRejectBadDefaults) {
  CheckInfo info{.id = "storage.write", .unit = Unit::kBytes};
  info.params = {{"size", "64MiB", "bytes per process"}};
  CheckSettings s = *DefaultSettings(info);
  EXPECT_EQ(s.params.at("size"), "64MiB");
  EXPECT_FALSE(s.warn);
  info.default_fail = "lots";
  EXPECT_FALSE(DefaultSettings(info).ok());
}

}  // namespace
}  // namespace railyard::validate
