#include "railyard/launch/binding.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace railyard::launch {
namespace {

using topo::PathClass;

std::vector<int> Range(int first, int last) {
  std::vector<int> v;
  for (int i = first; i <= last; ++i) v.push_back(i);
  return v;
}

// An 8-GPU host in the common shape: two NUMA nodes of 16 cores, GPUs 0-3 on node 0 and 4-7
// on node 1, one RDMA NIC per GPU pair behind the same PCIe switch, and a management NIC.
topo::Node EightGpuNode() {
  topo::Node node{.name = "gpu0", .gpu_count = 8};
  node.numa = {{.id = 0, .cpus = Range(0, 15)}, {.id = 1, .cpus = Range(16, 31)}};
  for (int g = 0; g < 8; ++g) node.gpus.push_back({.index = g, .numa_node = g / 4});
  for (int n = 0; n < 4; ++n) {
    node.nics.push_back({.name = fmt::format("mlx5_{}", n), .numa_node = n / 2, .rdma = true});
  }
  node.nics.push_back({.name = "eth0", .numa_node = 0, .rdma = false});
  for (int g = 0; g < 8; ++g) {
    for (int n = 0; n < 4; ++n) {
      PathClass p =
          n == g / 2 ? PathClass::kPIX : (n / 2 == g / 4 ? PathClass::kNODE : PathClass::kSYS);
      node.gpu_nic_paths.push_back({.gpu = g, .nic = fmt::format("mlx5_{}", n), .path = p});
    }
    node.gpu_nic_paths.push_back({.gpu = g, .nic = "eth0", .path = PathClass::kSYS});
  }
  return node;
}

TEST(BindingTest, GpuNumaCoresAndNearestNic) {
  auto plan = PlanBindings(EightGpuNode(), 8);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const RankBinding& b = (*plan)[i];
    EXPECT_EQ(b.local_rank, i);
    EXPECT_EQ(b.gpu, i);
    EXPECT_EQ(b.numa_node, i / 4);
    EXPECT_EQ(b.cpus, i < 4 ? Range(0, 15) : Range(16, 31));
    EXPECT_EQ(b.nic, fmt::format("mlx5_{}", i / 2));
    EXPECT_EQ(b.nic_path, PathClass::kPIX);
    EXPECT_TRUE(b.nic_rdma);
  }
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ((*plan)[5].Env(), (Env{{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                                   {"CUDA_VISIBLE_DEVICES", "5"},
                                   {"NCCL_IB_HCA", "=mlx5_2"}}));
}

TEST(BindingTest, GpusTakenInModelOrder) {
  topo::Node node = EightGpuNode();
  // A model listing GPUs out of index order (as a hand-written profile may): rank i still
  // takes the i-th listed GPU, and its NUMA node.
  std::swap(node.gpus[0], node.gpus[6]);
  auto plan = PlanBindings(node, 2);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ((*plan)[0].gpu, 6);
  EXPECT_EQ((*plan)[0].numa_node, 1);
  EXPECT_EQ((*plan)[0].nic, "mlx5_3");
  EXPECT_EQ((*plan)[1].gpu, 1);
}

TEST(BindingTest, NicTiesPreferRdmaThenModelOrder) {
  topo::Node node{.name = "n", .gpu_count = 1};
  node.gpus = {{.index = 0, .numa_node = 0}};
  node.numa = {{.id = 0, .cpus = {0, 1}}};
  node.nics = {{.name = "eth0"}, {.name = "ib1", .rdma = true}, {.name = "ib0", .rdma = true}};
  node.gpu_nic_paths = {{.gpu = 0, .nic = "eth0", .path = PathClass::kPHB},
                        {.gpu = 0, .nic = "ib0", .path = PathClass::kPHB},
                        {.gpu = 0, .nic = "ib1", .path = PathClass::kPHB}};
  auto plan = PlanBindings(node, 1);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ((*plan)[0].nic, "ib1");  // listed before ib0 among the RDMA NICs
  // A closer plain NIC still wins: the model's distance comes first.
  node.gpu_nic_paths[0].path = PathClass::kPXB;
  plan = PlanBindings(node, 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)[0].nic, "eth0");
  EXPECT_FALSE((*plan)[0].nic_rdma);
  EXPECT_EQ((*plan)[0].Env().size(), 2u);  // no NCCL_IB_HCA for a plain NIC
}

TEST(BindingTest, WithoutGpusRanksSpreadOverNumaNodesInBlocks) {
  topo::Node node{.name = "cpu0"};
  node.numa = {{.id = 0, .cpus = {0, 1}}, {.id = 1, .cpus = {2, 3}}};
  node.nics = {{.name = "ib0", .numa_node = 1, .rdma = true}};
  auto plan = PlanBindings(node, 4);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<int> numa;
  for (const RankBinding& b : *plan) numa.push_back(b.numa_node);
  EXPECT_EQ(numa, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ((*plan)[3].cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ((*plan)[0].gpu, -1);
  // No GPU paths: the RDMA NIC on the rank's own NUMA node.
  EXPECT_EQ((*plan)[0].nic, "");
  EXPECT_EQ((*plan)[2].nic, "ib0");
  EXPECT_FALSE((*plan)[2].nic_path.has_value());
  EXPECT_EQ((*plan)[2].Env(),
            (std::vector<std::pair<std::string, std::string>>{{"NCCL_IB_HCA", "=ib0"}}));
}

TEST(BindingTest, GpuCountWithoutDetailBindsIndicesAndSpreadsCpus) {
  topo::Node node{.name = "n", .gpu_count = 2};
  node.numa = {{.id = 0, .cpus = {0}}, {.id = 1, .cpus = {1}}};
  auto plan = PlanBindings(node, 2);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ((*plan)[1].gpu, 1);
  EXPECT_EQ((*plan)[1].cpus, (std::vector<int>{1}));
}

TEST(BindingTest, TooManyRanksIsAClearError) {
  auto plan = PlanBindings(EightGpuNode(), 9);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message(),
            "binding ranks on gpu0: --nproc-per-host 9 is more than its 8 GPUs");

  topo::Node cpu_only{.name = "cpu0"};
  cpu_only.numa = {{.id = 0, .cpus = {0, 1}}, {.id = 1, .cpus = {1}}};  // CPU 1 counted once
  plan = PlanBindings(cpu_only, 3);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "binding ranks on cpu0: --nproc-per-host 3 is more than its 2 CPUs");
  EXPECT_FALSE(PlanBindings(cpu_only, 0).ok());
  // No NUMA model: nothing to check against, and no CPU binding.
  plan = PlanBindings(topo::Node{.name = "bare"}, 64);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE((*plan)[63].cpus.empty());
}

TEST(BindingTest, FormatsCpuListsAndTheTable) {
  EXPECT_EQ(FormatCpuList({}), "-");
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({5}), "5");
  auto plan = PlanBindings(EightGpuNode(), 2);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(FormatBindingTable("gpu0", *plan),
            "host gpu0\n"
            "local_rank  gpu  numa  cpus  nic     path  rdma\n"
            "0           0    0     0-15  mlx5_0  PIX   yes\n"
            "1           1    0     0-15  mlx5_0  PIX   yes\n");
}

// Applies `cpus` in a forked child and returns what sched_getaffinity says there, so this
// process's own affinity is left alone. Exit code 0: equal; 1: different; 2: apply failed.
int ApplyInChild(const std::vector<int>& cpus) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!ApplyAffinity(cpus).ok()) ::_exit(2);
    Result<std::vector<int>> got = CurrentAffinity();
    ::_exit(got.ok() && *got == cpus ? 0 : 1);
  }
  if (pid < 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// The rank's affinity against the model, on a profile made of this machine's CPUs: one NUMA
// node per CPU this test may run on, one GPU on each.
TEST(BindingTest, AppliedAffinityMatchesTheModel) {
  Result<std::vector<int>> mine = CurrentAffinity();
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  ASSERT_FALSE(mine->empty());
  topo::Node node{.name = "local", .gpu_count = static_cast<int>(mine->size())};
  for (size_t i = 0; i < mine->size(); ++i) {
    node.numa.push_back({.id = static_cast<int>(i), .cpus = {(*mine)[i]}});
    node.gpus.push_back({.index = static_cast<int>(i), .numa_node = static_cast<int>(i)});
  }
  auto plan = PlanBindings(node, static_cast<int>(mine->size()));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const RankBinding& b : *plan) {
    ASSERT_EQ(b.cpus, std::vector<int>{(*mine)[b.local_rank]});
    EXPECT_EQ(ApplyInChild(b.cpus), 0) << "local rank " << b.local_rank;
  }
  // One NUMA node holding every CPU: a set of several, not just one.
  topo::Node whole{.name = "local"};
  whole.numa = {{.id = 0, .cpus = *mine}};
  plan = PlanBindings(whole, 1);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ((*plan)[0].cpus, *mine);
  EXPECT_EQ(ApplyInChild((*plan)[0].cpus), 0);
}

TEST(BindingTest, ApplyRejectsCpuNumbersOutOfRange) {
  std::vector<int> bad = {-1};
  EXPECT_EQ(ApplyAffinity(bad).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ApplyAffinity({}).ok());
}

}  // namespace
}  // namespace railyard::launch
