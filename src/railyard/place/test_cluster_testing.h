// The small two-spine cluster the placement and extender tests share:
//
//   spine0 > {leaf0: n0 n1, leaf1: n2 n3}, spine1 > {leaf2: n4 n5}, 8 GPUs per node.
//
// `spine_level` names the upper level, so a test can give it a name that is not valid label
// text ("Spine Row") and check that its label key is hashed.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "railyard/topo/model.h"

namespace railyard::place {

inline topo::Cluster TwoSpineTestCluster(const std::string& spine_level = "spine") {
  topo::ClusterBuilder b("test");
  b.SetLevels({spine_level, "leaf"});
  b.AddSwitch("spine0", spine_level, "", 0);
  b.AddSwitch("spine1", spine_level, "", 0);
  b.AddSwitch("leaf0", "leaf", "spine0", 0);
  b.AddSwitch("leaf1", "leaf", "spine0", 0);
  b.AddSwitch("leaf2", "leaf", "spine1", 0);
  const char* leaves[] = {"leaf0", "leaf0", "leaf1", "leaf1", "leaf2", "leaf2"};
  for (int i = 0; i < 6; ++i) {
    topo::Node n;
    n.name = "n" + std::to_string(i);
    n.gpu_count = 8;
    b.AddNode(n, leaves[i]);
  }
  auto c = std::move(b).Finish();
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

}  // namespace railyard::place
