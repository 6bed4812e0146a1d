// Binding: which GPU, CPUs and NIC each local rank of a host uses, planned from the host's
// node model (topo::Node) and applied in the rank's process before it execs.
//
//   RY_ASSIGN_OR_RETURN(std::vector<RankBinding> plan, PlanBindings(node, nproc_per_host));
//   env += plan[local_rank].Env();                // CUDA_VISIBLE_DEVICES, NCCL_IB_HCA, ...
//   ApplyAffinity(plan[local_rank].cpus);         // in the child, before exec
//   fmt::print("{}", FormatBindingTable(node.name, plan));   // run --dry-run
//
// Rules, in the order the node model gives (Node::gpus, Node::numa, Node::nics):
// - GPU: local rank i takes the i-th GPU. CUDA_VISIBLE_DEVICES is its index with
//   CUDA_DEVICE_ORDER=PCI_BUS_ID, the order nvidia-smi and the model use (CUDA's default
//   puts the fastest GPU first, which can differ).
// - CPUs: all cores of the NUMA node of that GPU. Without GPUs (or without the GPU's NUMA
//   node in the model) ranks are spread over the NUMA nodes in blocks: with R ranks and N
//   nodes rank i takes node i*N/R, so neighbouring ranks share a node. No NUMA nodes in the
//   model: no CPU binding.
// - NIC: the GPU's closest NIC by the model's GPU-NIC paths (PIX < PXB < PHB < NODE < SYS),
//   an RDMA NIC before another at the same distance, then model order. Without paths for the
//   GPU: an RDMA NIC on the rank's NUMA node, else none. NCCL_IB_HCA names it (exact match)
//   when it is RDMA.
//
// Thread-safety: pure functions except ApplyAffinity, which changes the calling thread.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::launch {

struct RankBinding {
  int local_rank = 0;
  int gpu = -1;                             // Gpu::index; -1 without a GPU
  int numa_node = -1;                       // NumaNode::id the CPUs come from; -1 when not bound
  std::vector<int> cpus;                    // sorted; empty: no CPU binding
  std::string nic;                          // Nic::name; empty when none was chosen
  std::optional<topo::PathClass> nic_path;  // unknown when chosen by NUMA node
  bool nic_rdma = false;
  friend bool operator==(const RankBinding&, const RankBinding&) = default;

  // The environment variables this binding sets: CUDA_DEVICE_ORDER and CUDA_VISIBLE_DEVICES
  // with a GPU, NCCL_IB_HCA=<'='><nic> with an RDMA NIC.
  std::vector<std::pair<std::string, std::string>> Env() const;
};

// The binding of local ranks 0..nproc_per_host-1 on `node`. INVALID_ARGUMENT naming the node
// when nproc_per_host < 1, when it exceeds the node's GPUs (a node with GPUs), or when it
// exceeds the CPUs in its NUMA model.
Result<std::vector<RankBinding>> PlanBindings(const topo::Node& node, int nproc_per_host);

// "0-3,8,10-11" for a sorted CPU list; "-" when empty.
std::string FormatCpuList(const std::vector<int>& cpus);

// A fixed-width table, one line per local rank, headed by the host name:
//   host node0
//   local_rank  gpu  numa  cpus   nic     path  rdma
//   0           0    0     0-15   mlx5_0  PIX   yes
std::string FormatBindingTable(const std::string& host, const std::vector<RankBinding>& plan);

// Restricts the calling thread (and the threads and processes it creates later) to `cpus`;
// no-op for an empty list. Call it in a forked child before exec: it allocates nothing for
// CPU numbers below CPU_SETSIZE. INVALID_ARGUMENT for a negative or too large CPU number,
// the OS error (EINVAL: none of them online) otherwise.
Status ApplyAffinity(std::span<const int> cpus);

// The calling thread's CPU affinity, sorted.
Result<std::vector<int>> CurrentAffinity();

}  // namespace railyard::launch
