// The storage and collective check descriptors: registered, with defaults that parse into the
// probes' options, and SKIPPED (never PASS) when run on one host alone.
#include <gtest/gtest.h>

#include "railyard/validate/checks/check_testing.h"
#include "railyard/validate/probe_settings.h"

namespace railyard::validate {
namespace {

constexpr const char* kFromCoordinator = "runs from the coordinator (railyard validate --hosts)";

class ProbeChecksTest : public CheckTest {
 protected:
  CheckSettings Defaults(std::string_view id) {
    const Check* check = registry_.Find(id);
    EXPECT_NE(check, nullptr) << id;
    if (check == nullptr) return {};
    Result<CheckSettings> s = DefaultSettings(check->info());
    EXPECT_TRUE(s.ok()) << id << ": " << s.status().ToString();
    return s.ok() ? *s : CheckSettings{};
  }
};

TEST_F(ProbeChecksTest, DescriptorsAreRegisteredWithSaneDefaults) {
  struct Want {
    const char* id;
    Category category;
    bool shared_dir;
    Unit unit;
  } wants[] = {
      {"storage.throughput", Category::kStorage, true, Unit::kRate},
      {"storage.metadata", Category::kStorage, true, Unit::kCount},
      {"collective.allreduce", Category::kCollective, false, Unit::kRate},
      {"collective.nccl_tests", Category::kCollective, false, Unit::kRate},
  };
  for (const Want& w : wants) {
    const Check* check = registry_.Find(w.id);
    ASSERT_NE(check, nullptr) << w.id;
    const CheckInfo& info = check->info();
    EXPECT_EQ(info.category, w.category) << w.id;
    EXPECT_EQ(info.cost, Cost::kFull) << w.id;
    EXPECT_EQ(info.needs.shared_dir, w.shared_dir) << w.id;
    EXPECT_FALSE(info.needs.root) << w.id;
    EXPECT_EQ(info.unit, w.unit) << w.id;
    EXPECT_TRUE(info.higher_is_better) << w.id;
    EXPECT_GT(info.timeout.count(), 0) << w.id;
    CheckSettings s = Defaults(w.id);
    ASSERT_TRUE(s.warn.has_value() && s.fail.has_value()) << w.id;
    EXPECT_NE(s.warn->kind, Threshold::Kind::kAbsolute) << w.id;
    // The fail bound lies below the warn bound: a value is WARN before it is FAIL.
    EXPECT_LT(s.fail->value, s.warn->value) << w.id;
  }
}

TEST_F(ProbeChecksTest, OnOneHostTheyAreSkippedNeverPass) {
  Profile profile;
  profile.name = "cpu";
  for (const char* id : {"collective.allreduce", "collective.nccl_tests"}) {
    Outcome o = Run(id, profile);
    EXPECT_EQ(o.verdict, Verdict::kSkipped) << id;
    EXPECT_EQ(o.reason, kFromCoordinator) << id;
  }
  // Storage checks are gated on the shared directory first (none on one host).
  for (const char* id : {"storage.throughput", "storage.metadata"}) {
    Outcome o = Run(id, profile);
    EXPECT_EQ(o.verdict, Verdict::kSkipped) << id;
    const Check* check = registry_.Find(id);
    CheckSettings s = Defaults(id);
    CheckContext ctx{.host = "node1", .profile = &profile, .settings = &s, .env = &env_};
    EXPECT_EQ(check->Run(ctx).reason, kFromCoordinator) << id;
  }
}

TEST_F(ProbeChecksTest, DefaultsBecomeProbeOptions) {
  Result<StorageProbeOptions> storage = StorageProbeOptionsFrom(Defaults("storage.throughput"));
  ASSERT_TRUE(storage.ok()) << storage.status().ToString();
  EXPECT_EQ(storage->bytes_per_file, 16u << 20);
  EXPECT_EQ(storage->block_bytes, 1u << 20);
  EXPECT_EQ(storage->files, 1);

  Result<int> items = MetadataItemsFrom(Defaults("storage.metadata"));
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  EXPECT_EQ(*items, 1000);

  Result<AllreduceSweepParams> sweep = AllreduceParamsFrom(Defaults("collective.allreduce"));
  ASSERT_TRUE(sweep.ok()) << sweep.status().ToString();
  EXPECT_EQ(sweep->sizes, (std::vector<uint64_t>{64 << 10, 1 << 20}));
  EXPECT_EQ(sweep->warmup, 2);
  EXPECT_EQ(sweep->iters, 5);

  Result<NcclTestsOptions> nccl = NcclTestsOptionsFrom(Defaults("collective.nccl_tests"));
  ASSERT_TRUE(nccl.ok()) << nccl.status().ToString();
  EXPECT_TRUE(nccl->binary.empty());
  EXPECT_TRUE(nccl->launcher.empty());
  EXPECT_EQ(nccl->args, (std::vector<std::string>{"-b", "8", "-e", "128M", "-f", "2", "-c", "1"}));
}

TEST_F(ProbeChecksTest, BadParametersNameTheParameterAndValue) {
  CheckSettings s = Defaults("storage.throughput");
  s.params["files"] = "many";
  Result<StorageProbeOptions> storage = StorageProbeOptionsFrom(s);
  ASSERT_FALSE(storage.ok());
  EXPECT_EQ(storage.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(storage.status().message().find("files: 'many'"), std::string::npos)
      << storage.status().ToString();
  s = Defaults("storage.throughput");
  s.params["size"] = "0";
  EXPECT_NE(StorageProbeOptionsFrom(s).status().message().find("size: '0'"), std::string::npos);

  s = Defaults("collective.allreduce");
  s.params["sizes"] = "big";
  Result<AllreduceSweepParams> sweep = AllreduceParamsFrom(s);
  ASSERT_FALSE(sweep.ok());
  EXPECT_NE(sweep.status().message().find("sizes"), std::string::npos) << sweep.status().ToString();
  EXPECT_NE(sweep.status().message().find("big"), std::string::npos) << sweep.status().ToString();

  s = Defaults("collective.nccl_tests");
  s.params["launcher"] = "  mpirun -np 16 ";
  EXPECT_EQ(NcclTestsOptionsFrom(s)->launcher, (std::vector<std::string>{"mpirun", "-np", "16"}));
}

}  // namespace
}  // namespace railyard::validate
