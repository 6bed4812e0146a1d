// Test support: golden files for the topology writers and exports.
//
// Golden files live in testdata/golden/. Run a test with RAILYARD_UPDATE_GOLDEN=1 to
// rewrite them from the current output, then review the diff before committing.
// Test-only: include from *_test.cc files (it uses gtest assertions).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "railyard/base/files.h"
#include "railyard/topo/testdata_testing.h"

namespace railyard::topo::testing {

inline void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = TestData("golden/" + name);
  const char* update = std::getenv("RAILYARD_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    ASSERT_TRUE(base::WriteFileAtomic(path, actual).ok()) << path;
    return;
  }
  Result<std::string> expected = base::ReadFile(path);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString()
                             << " (run with RAILYARD_UPDATE_GOLDEN=1 to create it)";
  EXPECT_EQ(*expected, actual) << "golden " << path << " differs";
}

}  // namespace railyard::topo::testing
