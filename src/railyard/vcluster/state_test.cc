#include "railyard/vcluster/state.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>

namespace railyard::vcluster {
namespace {

ClusterState Sample() {
  ClusterSpec spec;
  spec.prefix = "ryt";
  spec.hosts = 5;
  spec.leaves = 2;
  spec.leaf_rate_bits = 1'000'000'000;
  spec.spine_rate_bits = 500'000'000;
  ClusterState s;
  s.plan = MakePlan(spec);
  s.created = "2026-11-30T19:00:00Z";
  s.host_rates["node1"] = 100'000'000;
  s.cut.insert("node4");
  s.paths.push_back({"node0", "node3", 50'000'000});
  s.topology_file = "/tmp/x.yaml";
  s.control_address = "198.18.255.254";
  s.shared_dir = "/tmp/ryt-shared";
  s.uplink_rates["leaf1"] = 40'000'000;
  s.scratch_faults["node2"] = ScratchFault::kFull;
  s.scratch_faults["node3"] = ScratchFault::kReadOnly;
  s.hidden_providers["node3"] = {"tcp", "udp"};
  return s;
}

TEST(StateTest, JsonRoundTrip) {
  ClusterState s = Sample();
  auto back = StateFromJson(StateToJson(s), "state.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->spec().hosts, 5);
  EXPECT_EQ(back->spec().spine_rate_bits, 500'000'000u);
  EXPECT_EQ(back->HostRate("node1"), 100'000'000u);
  EXPECT_EQ(back->HostRate("node2"), 1'000'000'000u);
  EXPECT_EQ(back->cut.count("node4"), 1u);
  ASSERT_EQ(back->paths.size(), 1u);
  EXPECT_EQ(back->paths[0].b, "node3");
  EXPECT_EQ(back->plan.hosts[4].netns, "ryt-node4");
  EXPECT_EQ(back->control_address, "198.18.255.254");
  EXPECT_EQ(back->ScratchDir("node2"), "/tmp/ryt-shared/node2");
  EXPECT_EQ(back->UplinkRate("leaf1"), 40'000'000u);
  EXPECT_EQ(back->UplinkRate("leaf0"), 500'000'000u);
  EXPECT_EQ(back->scratch_faults, s.scratch_faults);
  EXPECT_EQ(back->hidden_providers, s.hidden_providers);
}

// Files written before the faults existed have none of their fields: still readable.
TEST(StateTest, FaultFieldsAreOptionalAndCheckedWhenPresent) {
  const std::string base =
      R"({"state_version":1,"prefix":"ry","mode":"netns","hosts":2,"leaves":1,)"
      R"("leaf_rate_bits":0,"spine_rate_bits":0)";
  auto old = StateFromJson(base + "}", "s.json");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_TRUE(old->shared_dir.empty());
  EXPECT_EQ(old->ScratchDir("node0"), "");
  auto bad = StateFromJson(base + R"(,"scratch_faults":{"node1":"broken"}})", "s.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("scratch_faults.node1"), std::string::npos)
      << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("readonly or full"), std::string::npos);
  auto list = StateFromJson(base + R"(,"hidden_providers":{"node1":"tcp"}})", "s.json");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("hidden_providers.node1"), std::string::npos)
      << list.status().ToString();
}

TEST(StateTest, BadFilesNameTheSourceAndField) {
  auto garbage = StateFromJson("{not json", "/run/railyard/vcluster-ry.json");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("/run/railyard/vcluster-ry.json"), std::string::npos);
  auto version = StateFromJson(R"({"state_version": 7})", "s.json");
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("state_version"), std::string::npos);
  auto mode = StateFromJson(
      R"({"state_version":1,"prefix":"ry","mode":"vm","hosts":2,"leaves":1,"leaf_rate_bits":0,"spine_rate_bits":0})",
      "s.json");
  ASSERT_FALSE(mode.ok());
  EXPECT_NE(mode.status().message().find("'mode'"), std::string::npos);
  auto invalid = StateFromJson(
      R"({"state_version":1,"prefix":"ry","mode":"netns","hosts":2,"leaves":3,"leaf_rate_bits":0,"spine_rate_bits":0})",
      "s.json");
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find("--leaves 3"), std::string::npos);
}

TEST(StateTest, WrongTypesNameTheFieldAndWhatWasExpected) {
  const std::string head =
      R"({"state_version":1,"prefix":"ry","mode":"netns","hosts":2,"leaves":1,)";
  struct Case {
    std::string body;
    std::string want;
  };
  const Case cases[] = {
      {R"({"state_version":1,"prefix":"ry","mode":"netns","leaves":1})",
       "field 'hosts' is missing (expected an integer)"},
      {head + R"("leaf_rate_bits":"fast","spine_rate_bits":0})",
       "field 'leaf_rate_bits': expected a non-negative integer (bits/s), got \"fast\""},
      {head + R"("leaf_rate_bits":-1,"spine_rate_bits":0})", "field 'leaf_rate_bits'"},
      {head + R"("leaf_rate_bits":0,"spine_rate_bits":0,"host_rates":{"node1":"x"}})",
       "field 'host_rates.node1': expected a non-negative integer"},
      {head + R"("leaf_rate_bits":0,"spine_rate_bits":0,"cut":"node1"})",
       "field 'cut': expected a list of host names"},
      {head + R"("leaf_rate_bits":0,"spine_rate_bits":0,"paths":[{"a":"node0","b":1}]})",
       "field 'paths[0].b': expected a string, got 1"},
      {head + R"("leaf_rate_bits":0,"spine_rate_bits":0,"paths":[{"a":"node0","b":"node1"}]})",
       "field 'paths[0].rate_bits' is missing"},
      {"[1,2]", "expected a JSON object"},
  };
  for (const auto& c : cases) {
    auto r = StateFromJson(c.body, "/run/railyard/vcluster-ry.json");
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << c.body << "\n  got: " << r.status().message();
    EXPECT_NE(r.status().message().find("/run/railyard/vcluster-ry.json"), std::string::npos);
  }
}

// Sets an environment variable for one test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DefaultsTest, PrefixAndStateDirComeFromTheirVariables) {
  {
    ScopedEnv prefix(kPrefixEnv, "ryx");
    ScopedEnv dir(kStateDirEnv, "/tmp/ry-state");
    EXPECT_EQ(DefaultPrefix(), "ryx");
    EXPECT_EQ(DefaultStateDir(), "/tmp/ry-state");
  }
  ScopedEnv prefix(kPrefixEnv, "");
  EXPECT_EQ(DefaultPrefix(), "ry");  // empty counts as unset
}

}  // namespace
}  // namespace railyard::vcluster
