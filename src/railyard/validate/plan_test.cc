#include "railyard/validate/plan.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace railyard::validate {
namespace {

// A fabric check as the next ones will look: a rate, median bounds, parameters.
class PairStub final : public BasicCheck {
 public:
  PairStub()
      : BasicCheck(
            {.id = "fabric.stub_bandwidth",
             .summary = "stub",
             .category = Category::kFabric,
             .cost = Cost::kFull,
             .unit = Unit::kRate,
             .default_warn = "90% of median",
             .default_fail = "80% of median",
             .params = {{"size", "64MiB", "bytes per message"}, {"duration", "2s", "per pair"}}}) {}
  Outcome Run(const CheckContext&) const override { return Outcome::Unknown("stub"); }
};

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(RegisterBuiltinChecks(registry_).ok());
    ASSERT_TRUE(registry_.Register(std::make_unique<PairStub>()).ok());
  }
  Result<Plan> Parse(std::string_view text) { return ParsePlan(text, "p.yaml", registry_); }
  std::string Error(std::string_view text) {
    Result<Plan> p = Parse(text);
    EXPECT_FALSE(p.ok()) << text;
    return p.ok() ? "" : p.status().message();
  }
  CheckRegistry registry_;
};

constexpr std::string_view kPlan = R"(version: 1
name: t
profiles:
  - {name: gpu, hosts: "g[1-4]", nic_rate: 400Gbit/s, gpus: 8, rdma: true, memlock: unlimited,
     mounts: [{path: /lustre, fs: lustre}]}
  - {name: cpu, gpus: 0, memlock: 64MiB}
checks:
  - id: fabric.stub_bandwidth
    fail: 50% of expected
    warn: none
    params: {size: 1MiB}
    timeout: 30s
  - {id: node.swap, profiles: [gpu]}
)";

TEST_F(PlanTest, ParsesProfilesChecksAndOverrides) {
  Result<Plan> p = Parse(kPlan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name, "t");
  ASSERT_EQ(p->profiles.size(), 2u);
  const Profile& gpu = p->ProfileFor("g3");
  EXPECT_EQ(gpu.name, "gpu");
  EXPECT_EQ(gpu.nic_rate_bits, 400'000'000'000u);
  EXPECT_EQ(gpu.gpus, 8);
  EXPECT_EQ(gpu.rdma, true);
  EXPECT_EQ(gpu.memlock_bytes, kUnlimited);
  EXPECT_EQ(gpu.mounts, (std::vector<MountExpectation>{{"/lustre", "lustre"}}));
  EXPECT_EQ(p->ProfileFor("login1").name, "cpu");  // the catch-all
  EXPECT_EQ(p->ProfileFor("login1").memlock_bytes, 64u << 20);

  ASSERT_EQ(p->checks.size(), 2u);  // sorted by id
  const PlannedCheck* pair = p->Find("fabric.stub_bandwidth");
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(pair->settings.fail->kind, Threshold::Kind::kOfExpected);
  EXPECT_DOUBLE_EQ(pair->settings.fail->value, 0.5);
  EXPECT_FALSE(pair->settings.warn);
  EXPECT_EQ(pair->settings.params.at("size"), "1MiB");
  EXPECT_EQ(pair->settings.params.at("duration"), "2s");  // default kept
  EXPECT_EQ(pair->timeout, std::chrono::seconds(30));
  const PlannedCheck* swap = p->Find("node.swap");
  EXPECT_TRUE(swap->AppliesTo("gpu"));
  EXPECT_FALSE(swap->AppliesTo("cpu"));
  EXPECT_EQ(swap->timeout, swap->check->info().timeout);
  EXPECT_EQ(p->Find("node.memlock"), nullptr);
}

TEST_F(PlanTest, BuiltinPlansFollowCost) {
  Result<Plan> quick = BuiltinPlan("quick", registry_);
  ASSERT_TRUE(quick.ok()) << quick.status().ToString();
  // quick holds exactly the checks of cost quick; full adds those of cost full.
  size_t quick_cost = 0;
  for (const std::string& id : registry_.Ids()) {
    const CheckInfo& info = registry_.Find(id)->info();
    quick_cost += info.cost == Cost::kQuick;
    EXPECT_EQ(quick->Find(id) != nullptr, info.cost == Cost::kQuick) << id;
  }
  EXPECT_EQ(quick->checks.size(), quick_cost);
  EXPECT_EQ(quick->Find("fabric.stub_bandwidth"), nullptr);
  Result<Plan> full = LoadPlan("full", registry_);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->checks.size(), registry_.size());
  EXPECT_EQ(full->profiles.size(), 1u);
  EXPECT_EQ(full->ProfileFor("anything").name, "default");
  EXPECT_EQ(BuiltinPlan("fast", registry_).status().message(),
            "no built-in plan 'fast' (built-in: quick, full, vcluster, vcluster-quick)");
  EXPECT_EQ(LoadPlan("vclustr", registry_).status().message(),
            "no built-in plan or file 'vclustr' (did you mean 'vcluster'?) (built-in: quick, "
            "full, vcluster, vcluster-quick)");
  Result<Plan> vcluster = LoadPlan("vcluster", registry_);
  ASSERT_TRUE(vcluster.ok()) << vcluster.status().ToString();
  EXPECT_EQ(vcluster->Find("node.sysctl"), nullptr);
  EXPECT_EQ(vcluster->Find("node.memlock"), nullptr);
  EXPECT_NE(vcluster->Find("fabric.pair_bandwidth"), nullptr);
  EXPECT_EQ(vcluster->checks.size(), full->checks.size() - 2);
  EXPECT_EQ(vcluster->ProfileFor("node3").gpus, 0);
  Result<Plan> vcluster_quick = LoadPlan("vcluster-quick", registry_);
  ASSERT_TRUE(vcluster_quick.ok()) << vcluster_quick.status().ToString();
  EXPECT_EQ(vcluster_quick->checks.size(), quick->checks.size() - 2);
  EXPECT_EQ(vcluster_quick->Find("fabric.pair_bandwidth"), nullptr);
}

TEST_F(PlanTest, IncludeThenDisableOrRetune) {
  Result<Plan> p = Parse(
      "version: 1\nname: x\ninclude: full\nchecks:\n  - {id: node.memlock, enabled: false}\n"
      "  - {id: node.swap, fail: 2GiB}\n");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->checks.size(), registry_.size() - 1);
  EXPECT_EQ(p->Find("node.memlock"), nullptr);
  EXPECT_DOUBLE_EQ(p->Find("node.swap")->settings.fail->value, 2.0 * (1 << 30));
  EXPECT_TRUE(p->Find("node.swap")->settings.warn);  // default kept
}

TEST_F(PlanTest, ErrorsNameFileLineAndNearestName) {
  const std::string head = "version: 1\nname: x\n";
  EXPECT_EQ(Error(head + "chekcs: []\n"),
            "p.yaml:3:1: top level: unknown key 'chekcs' (did you mean 'checks'? allowed: "
            "version, name, description, include, profiles, checks)");
  EXPECT_EQ(Error(head + "checks:\n  - id: node.memlok\n"),
            "p.yaml:4:9: field 'checks[0].id': unknown check 'node.memlok' (did you mean "
            "'node.memlock'?)");
  EXPECT_NE(Error(head + "checks:\n  - {id: node.swap, wran: 1GiB}\n")
                .find("p.yaml:4:21: field 'checks[0]': unknown key 'wran' (did you mean 'warn'?"),
            std::string::npos);
  EXPECT_EQ(Error(head + "checks:\n  - id: fabric.stub_bandwidth\n    params: {sise: 1MiB}\n"),
            "p.yaml:5:14: field 'checks[0].params': unknown parameter 'sise' of check "
            "'fabric.stub_bandwidth' (did you mean 'size'?)");
  EXPECT_EQ(Error(head + "checks:\n  - {id: node.swap, params: {x: 1}}\n"),
            "p.yaml:4:30: field 'checks[0].params': check 'node.swap' takes no parameters");
  EXPECT_EQ(
      Error(head + "profiles: [{name: gpu}]\nchecks:\n  - {id: node.swap, profiles: [gpus]}\n"),
      "p.yaml:5:32: field 'checks[0].profiles[0]': unknown profile 'gpus' (did you mean "
      "'gpu'?)");
  EXPECT_NE(Error(head + "checks:\n  - {id: node.swap, fail: lots}\n")
                .find("p.yaml:4:27: field 'checks[0].fail': threshold 'lots'"),
            std::string::npos);
  EXPECT_NE(Error(head + "checks:\n  - {id: node.swap}\n  - {id: node.swap}\n")
                .find("check 'node.swap' is listed twice (first at line 4)"),
            std::string::npos);
  EXPECT_EQ(Error("version: 2\nname: x\n"),
            "p.yaml:1:10: field 'version': version 2 is not a plan version this railyard reads "
            "(expected 1)");
  EXPECT_NE(Error(head + "profiles: [{name: a}, {name: b, hosts: n1}]\n").find("must come last"),
            std::string::npos);
  EXPECT_NE(Error(head + "profiles: [{name: a, hosts: 'n[3-1]'}]\n").find("descending"),
            std::string::npos);
  EXPECT_NE(Error(head + "profiles: [{name: a, memlock: lots}]\n").find("or 'unlimited'"),
            std::string::npos);
  EXPECT_NE(Error(head + "include: fast\n").find("unknown built-in plan 'fast'"),
            std::string::npos);
  EXPECT_NE(Error("name: x\n").find("missing required key 'version'"), std::string::npos);
  EXPECT_NE(Error("version: 1\nname: [\n").find("p.yaml:"), std::string::npos);
}

TEST_F(PlanTest, ShippedExamplesParse) {
  std::filesystem::path dir = RAILYARD_PLANS_DIR;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    Result<Plan> p = LoadPlan(entry.path().string(), registry_);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
  }
  EXPECT_GE(count, 2);
  Result<Plan> missing = LoadPlan((dir / "absent.yaml").string(), registry_);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace railyard::validate
