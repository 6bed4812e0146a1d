// Golden files for the topology writers (Slurm topology.conf and topology.yaml, Railyard
// YAML) on the checked-in 2-scalable-unit example. After an intended change, regenerate with
// RAILYARD_UPDATE_GOLDEN=1 and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "railyard/base/files.h"
#include "railyard/topo/golden_testing.h"
#include "railyard/topo/load.h"
#include "railyard/topo/slurm_format.h"
#include "railyard/topo/testdata_testing.h"
#include "railyard/topo/yaml_format.h"

namespace railyard::topo {
namespace {

using testing::ExpectGolden;

Cluster Example() {
  auto c = LoadTopology(testing::RepoFile("examples/topology-2su-rail.yaml"));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Cluster{};
}

TEST(ExportGoldenTest, SlurmTopologyConf) {
  Cluster c = Example();
  const std::string conf = WriteSlurmTopologyConf(c);
  ExpectGolden("2su_topology.conf", conf);
  // And it imports back to the same tree.
  auto back = ParseTopology(conf, "2su_topology.conf");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->levels, c.levels);
  EXPECT_EQ(back->nodes.size(), c.nodes.size());
}

TEST(ExportGoldenTest, SlurmTopologyYaml) {
  ExpectGolden("2su_slurm_topology.yaml", WriteSlurmTopologyYaml(Example()));
}

TEST(ExportGoldenTest, RailyardYamlIsStableAndRoundTrips) {
  Cluster c = Example();
  const std::string yaml = WriteTopologyYaml(c);
  ExpectGolden("2su_railyard.yaml", yaml);
  auto back = ParseTopology(yaml, "2su_railyard.yaml");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, c);
}

}  // namespace
}  // namespace railyard::topo
