// A fixture for check tests: the built-in registry, a FakeNodeEnv, and Run(id, profile) with
// the check's default settings (or `settings_` when a test sets some).
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string_view>

#include "railyard/validate/node_env_testing.h"
#include "railyard/validate/registry.h"

namespace railyard::validate {

class CheckTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(RegisterBuiltinChecks(registry_).ok()); }

  // Runs check `id` on "node1" with `profile`, the defaults overlaid with `params`.
  Outcome Run(std::string_view id, const Profile& profile,
              std::map<std::string, std::string> params = {}) {
    const Check* check = registry_.Find(id);
    EXPECT_NE(check, nullptr) << id;
    if (check == nullptr) return Outcome::Unknown("no such check");
    CheckSettings settings = *DefaultSettings(check->info());
    for (auto& [k, v] : params) {
      EXPECT_TRUE(settings.params.contains(k)) << id << " has no parameter " << k;
      settings.params[k] = v;
    }
    if (std::optional<Outcome> gated = Gate(check->info(), profile, Site{.root = env_.root})) {
      return *gated;
    }
    CheckContext ctx{.host = "node1", .profile = &profile, .settings = &settings, .env = &env_};
    return check->Run(ctx);
  }

  CheckRegistry registry_;
  FakeNodeEnv env_;
};

}  // namespace railyard::validate
