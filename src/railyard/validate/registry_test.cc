#include "railyard/validate/registry.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace railyard::validate {
namespace {

class StubCheck final : public BasicCheck {
 public:
  using BasicCheck::BasicCheck;
  Outcome Run(const CheckContext&) const override { return Outcome::Pass(); }
};

std::unique_ptr<Check> Stub(std::string id, Category c = Category::kNode) {
  return std::make_unique<StubCheck>(CheckInfo{.id = std::move(id), .category = c});
}

TEST(RegistryTest, RegistersByIdAndListsSorted) {
  CheckRegistry r;
  ASSERT_TRUE(r.Register(Stub("node.zeta")).ok());
  ASSERT_TRUE(r.Register(Stub("fabric.pair", Category::kFabric)).ok());
  EXPECT_EQ(r.Ids(), (std::vector<std::string>{"fabric.pair", "node.zeta"}));
  EXPECT_NE(r.Find("node.zeta"), nullptr);
  EXPECT_EQ(r.Find("node.eta"), nullptr);
}

TEST(RegistryTest, RejectsDuplicatesAndIdsOutsideTheirCategory) {
  CheckRegistry r;
  ASSERT_TRUE(r.Register(Stub("node.a")).ok());
  Status dup = r.Register(Stub("node.a"));
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  Status wrong = r.Register(Stub("gpu.a", Category::kNode));
  EXPECT_EQ(wrong.message(), "check id 'gpu.a' must be 'node.<name>' (its category is node)");
  EXPECT_FALSE(r.Register(Stub("node.")).ok());
  EXPECT_EQ(r.size(), 1u);
}

TEST(RegistryTest, UnknownIdNamesTheNearest) {
  CheckRegistry r;
  ASSERT_TRUE(RegisterBuiltinChecks(r).ok());
  Result<const Check*> c = r.Lookup("node.memlok");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "unknown check 'node.memlok' (did you mean 'node.memlock'?)");
  EXPECT_EQ(r.Lookup("completely.different").status().message(),
            "unknown check 'completely.different' (see --list-checks)");
}

TEST(RegistryTest, BuiltinChecksAreWellFormed) {
  CheckRegistry r;
  ASSERT_TRUE(RegisterBuiltinChecks(r).ok());
  std::vector<std::string> ids = r.Ids();
  for (const char* id : {"gpu.count", "gpu.health", "node.cpus", "node.fabric_providers",
                         "node.ib_ports", "node.memlock", "node.mounts", "node.swap"}) {
    EXPECT_TRUE(std::find(ids.begin(), ids.end(), id) != ids.end()) << id;
  }
  for (const std::string& id : r.Ids()) {
    const CheckInfo& info = r.Find(id)->info();
    EXPECT_FALSE(info.summary.empty()) << id;
    EXPECT_GT(info.timeout.count(), 0) << id;
  }
  EXPECT_EQ(RegisterBuiltinChecks(r).code(), StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace railyard::validate
