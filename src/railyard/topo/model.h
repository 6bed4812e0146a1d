// The cluster model: a tree of named switch levels over nodes, and each node's hardware.
//
// Every topology source (Railyard YAML, Slurm topology.conf, AWS instance topology, the
// virtual cluster's file, `railyard discover`) becomes one Cluster; placement, validation
// and every export read it. It is plain data with index-based links (no pointers), so it
// copies, compares and serialises simply.
//
//   levels   = {"block", "spine", "leaf"}       top first; the last is the leaf level
//   switches = every switch once; switch.level indexes `levels`; parent < 0 at the top
//   nodes    = hang off leaf switches (switch.level == levels.size() - 1)
//
// Rails: on a rail-optimised fabric a "leaf" in this tree is the rail group (scalable unit's
// set of rail switches); nic.rail says which rail switch of the group a NIC connects to.
//
// Thread-safety: a value; const methods are safe to call concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::topo {

// GPU-to-NIC path classes as `nvidia-smi topo -m` names them, closest first.
enum class PathClass { kPIX, kPXB, kPHB, kNODE, kSYS };
std::string_view PathClassName(PathClass p);  // "PIX", ...
Result<PathClass> ParsePathClass(std::string_view s);

struct Gpu {
  int index = 0;
  std::string uuid;           // "GPU-..." or empty
  std::string pci_bus_id;     // "0000:17:00.0" or empty
  int numa_node = -1;         // -1 unknown
  std::string nvlink_domain;  // NVLink/NVSwitch domain id (e.g. NVL72 clique), or empty
  friend bool operator==(const Gpu&, const Gpu&) = default;
};

struct Nic {
  std::string name;  // "mlx5_0", "eth0", "efa0"
  std::string pci_bus_id;
  int numa_node = -1;
  int rail = -1;           // -1: not on a rail
  uint64_t rate_bits = 0;  // link rate, bits/s; 0 unknown
  bool rdma = false;       // RDMA-capable (verbs/efa/cxi)
  friend bool operator==(const Nic&, const Nic&) = default;
};

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;
  friend bool operator==(const NumaNode&, const NumaNode&) = default;
};

struct GpuNicPath {
  int gpu = 0;      // Gpu::index
  std::string nic;  // Nic::name
  PathClass path = PathClass::kSYS;
  friend bool operator==(const GpuNicPath&, const GpuNicPath&) = default;
};

struct Node {
  std::string name;
  std::string address;          // fabric address, optional
  uint64_t link_rate_bits = 0;  // rate of the node's link to its leaf; 0 unknown
  int gpu_count = 0;            // GPUs usable by placement; == gpus.size() when gpus are listed
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<NumaNode> numa;
  std::vector<GpuNicPath> gpu_nic_paths;
  int leaf = -1;  // index into Cluster::switches; -1 until attached
  friend bool operator==(const Node&, const Node&) = default;
};

struct Switch {
  std::string name;
  int level = 0;                  // index into Cluster::levels
  int parent = -1;                // index into Cluster::switches, -1 at the top
  uint64_t uplink_rate_bits = 0;  // rate of the link to the parent; 0 unknown
  std::vector<int> children;      // switch indices, in input order
  std::vector<int> nodes;         // node indices, in input order (leaf level only)
  friend bool operator==(const Switch&, const Switch&) = default;
};

struct Cluster {
  std::string name;
  std::vector<std::string> levels;  // top first
  std::vector<Switch> switches;
  std::vector<Node> nodes;
  // Slurm block topology's BlockSizes (e.g. {32, 64}); empty for trees.
  std::vector<int> block_sizes;

  int leaf_level() const { return static_cast<int>(levels.size()) - 1; }
  // -1 when absent.
  int FindNode(std::string_view name) const;
  int FindSwitch(std::string_view name) const;
  int FindLevel(std::string_view name) const;
  // The switch at `level` above node `n` (its leaf when level == leaf_level()); -1 if none.
  int DomainOf(int node, int level) const;
  // All node indices under switch `s`, in tree order.
  std::vector<int> NodesUnder(int s) const;
  int TotalGpus() const;

  friend bool operator==(const Cluster&, const Cluster&) = default;
};

// Builder used by every parser: add levels, switches (by parent name) and nodes (by leaf
// name) in any order, then Finish() resolves names, checks the tree and fills indices.
// Errors from Finish name the offending switch or node and `source` (file name).
class ClusterBuilder {
 public:
  explicit ClusterBuilder(std::string source) : source_(std::move(source)) {}
  void SetName(std::string name) { cluster_.name = std::move(name); }
  void SetLevels(std::vector<std::string> levels) { cluster_.levels = std::move(levels); }
  void SetBlockSizes(std::vector<int> sizes) { cluster_.block_sizes = std::move(sizes); }
  // `line` (1-based, 0 unknown) is used in error messages.
  void AddSwitch(std::string name, std::string level, std::string parent, uint64_t uplink_rate_bits,
                 int line = 0);
  void AddNode(Node node, std::string leaf, int line = 0);
  // Checks: levels non-empty and unique; every switch's level exists; parents exist and sit
  // exactly one level higher; no cycles; switch and node names unique; every node under
  // exactly one leaf-level switch; gpu_count == gpus.size() when gpus are listed.
  Result<Cluster> Finish() &&;

 private:
  struct PendingSwitch {
    std::string name, level, parent;
    uint64_t rate;
    int line;
  };
  struct PendingNode {
    Node node;
    std::string leaf;
    int line;
  };
  std::string source_;
  Cluster cluster_;
  std::vector<PendingSwitch> switches_;
  std::vector<PendingNode> nodes_;
};

}  // namespace railyard::topo
