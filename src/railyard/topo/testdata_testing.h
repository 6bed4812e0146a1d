// Test support: paths of the topology test data (testdata/ beside this file) and of files at
// the repository's root (examples/). CMake defines RAILYARD_TOPO_TESTDATA for topo's tests
// only; this is the one place that reads it.
// Test-only: include from *_test.cc files.
#pragma once

#include <string>
#include <string_view>

namespace railyard::topo::testing {

// "<repo>/src/railyard/topo/testdata/<name>".
inline std::string TestData(std::string_view name) {
  return std::string(RAILYARD_TOPO_TESTDATA) + "/" + std::string(name);
}

// "<repo>/<name>", e.g. RepoFile("examples/topology-2su-rail.yaml").
inline std::string RepoFile(std::string_view name) {
  return std::string(RAILYARD_TOPO_TESTDATA) + "/../../../../" + std::string(name);
}

}  // namespace railyard::topo::testing
