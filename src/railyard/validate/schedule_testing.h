// Small clusters for the schedule and analysis tests, built through topo::ClusterBuilder.
//
//   topo::Cluster c = LeafCluster({4, 4});   // spine0 > leaf0: n0..n3, leaf1: n4..n7
//
// Hosts are named n0, n1, ... in leaf order; every host link runs at `host_rate` and every
// leaf uplink at `uplink_rate` (0: unknown).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "railyard/topo/model.h"

namespace railyard::validate {

inline topo::Cluster LeafCluster(const std::vector<int>& leaf_sizes, uint64_t host_rate = 0,
                                 uint64_t uplink_rate = 0) {
  topo::ClusterBuilder b("test");
  b.SetLevels({"spine", "leaf"});
  b.AddSwitch("spine0", "spine", "", 0);
  int n = 0;
  for (size_t l = 0; l < leaf_sizes.size(); ++l) {
    std::string leaf = "leaf" + std::to_string(l);
    b.AddSwitch(leaf, "leaf", "spine0", uplink_rate);
    for (int i = 0; i < leaf_sizes[l]; ++i) {
      topo::Node node;
      node.name = "n" + std::to_string(n++);
      node.link_rate_bits = host_rate;
      b.AddNode(node, leaf);
    }
  }
  Result<topo::Cluster> c = std::move(b).Finish();
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : topo::Cluster{};
}

}  // namespace railyard::validate
