#include "railyard/launch/binding.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <tuple>

namespace railyard::launch {
namespace {

const topo::NumaNode* FindNuma(const topo::Node& node, int id) {
  for (const topo::NumaNode& n : node.numa) {
    if (n.id == id && !n.cpus.empty()) return &n;
  }
  return nullptr;
}

const topo::Nic* FindNic(const topo::Node& node, const std::string& name) {
  for (const topo::Nic& n : node.nics) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

void BindNuma(const topo::NumaNode& numa, RankBinding* b) {
  b->numa_node = numa.id;
  b->cpus = numa.cpus;
  std::sort(b->cpus.begin(), b->cpus.end());
  b->cpus.erase(std::unique(b->cpus.begin(), b->cpus.end()), b->cpus.end());
}

void ChooseNic(const topo::Node& node, RankBinding* b) {
  // (path class, not RDMA, model position): smallest wins.
  std::optional<std::tuple<int, bool, size_t>> best;
  for (const topo::GpuNicPath& p : node.gpu_nic_paths) {
    if (b->gpu < 0 || p.gpu != b->gpu) continue;
    const topo::Nic* nic = FindNic(node, p.nic);
    if (nic == nullptr) continue;
    std::tuple<int, bool, size_t> key{static_cast<int>(p.path), !nic->rdma,
                                      static_cast<size_t>(nic - node.nics.data())};
    if (!best || key < *best) {
      best = key;
      b->nic = nic->name;
      b->nic_path = p.path;
      b->nic_rdma = nic->rdma;
    }
  }
  if (best || b->numa_node < 0) return;
  for (const topo::Nic& nic : node.nics) {
    if (nic.rdma && nic.numa_node == b->numa_node) {
      b->nic = nic.name;
      b->nic_rdma = true;
      return;
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> RankBinding::Env() const {
  std::vector<std::pair<std::string, std::string>> env;
  if (gpu >= 0) {
    env.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(gpu));
  }
  // '=': NCCL matches the name exactly, so mlx5_1 does not also select mlx5_10.
  if (!nic.empty() && nic_rdma) env.emplace_back("NCCL_IB_HCA", "=" + nic);
  return env;
}

Result<std::vector<RankBinding>> PlanBindings(const topo::Node& node, int nproc_per_host) {
  if (nproc_per_host < 1) {
    return InvalidArgument("binding ranks on {}: --nproc-per-host {} must be at least 1", node.name,
                           nproc_per_host);
  }
  int gpus = node.gpus.empty() ? node.gpu_count : static_cast<int>(node.gpus.size());
  if (gpus > 0 && nproc_per_host > gpus) {
    return InvalidArgument("binding ranks on {}: --nproc-per-host {} is more than its {} GPUs",
                           node.name, nproc_per_host, gpus);
  }
  std::set<int> all_cpus;
  std::vector<const topo::NumaNode*> numa;
  for (const topo::NumaNode& n : node.numa) {
    if (n.cpus.empty()) continue;
    numa.push_back(&n);
    all_cpus.insert(n.cpus.begin(), n.cpus.end());
  }
  if (!numa.empty() && nproc_per_host > static_cast<int>(all_cpus.size())) {
    return InvalidArgument("binding ranks on {}: --nproc-per-host {} is more than its {} CPUs",
                           node.name, nproc_per_host, all_cpus.size());
  }

  std::vector<RankBinding> plan(nproc_per_host);
  for (int i = 0; i < nproc_per_host; ++i) {
    RankBinding& b = plan[i];
    b.local_rank = i;
    const topo::NumaNode* gpu_numa = nullptr;
    if (gpus > 0) {
      if (node.gpus.empty()) {
        b.gpu = i;  // only a count in the model: indices in order
      } else {
        b.gpu = node.gpus[i].index;
        gpu_numa = FindNuma(node, node.gpus[i].numa_node);
      }
    }
    if (gpu_numa != nullptr) {
      BindNuma(*gpu_numa, &b);
    } else if (!numa.empty()) {
      size_t block = static_cast<size_t>(i) * numa.size() / static_cast<size_t>(nproc_per_host);
      BindNuma(*numa[block], &b);
    }
    ChooseNic(node, &b);
  }
  return plan;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  if (cpus.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string FormatBindingTable(const std::string& host, const std::vector<RankBinding>& plan) {
  std::vector<std::vector<std::string>> rows = {
      {"local_rank", "gpu", "numa", "cpus", "nic", "path", "rdma"}};
  for (const RankBinding& b : plan) {
    rows.push_back({std::to_string(b.local_rank), b.gpu < 0 ? "-" : std::to_string(b.gpu),
                    b.numa_node < 0 ? "-" : std::to_string(b.numa_node), FormatCpuList(b.cpus),
                    b.nic.empty() ? "-" : b.nic,
                    b.nic_path ? std::string(topo::PathClassName(*b.nic_path)) : "-",
                    b.nic.empty() ? "-" : (b.nic_rdma ? "yes" : "no")});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out = fmt::format("host {}\n", host);
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += c + 1 < row.size() ? fmt::format("{:<{}}  ", row[c], width[c]) : row[c];
    }
    out += line + "\n";
  }
  return out;
}

Status ApplyAffinity(std::span<const int> cpus) {
  if (cpus.empty()) return Status::Ok();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return InvalidArgument("CPU affinity: CPU {} is outside 0..{}", cpu, CPU_SETSIZE - 1);
    }
    CPU_SET(cpu, &set);
  }
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
    return ErrnoStatus(errno, fmt::format("sched_setaffinity to CPUs {}",
                                          FormatCpuList({cpus.begin(), cpus.end()})));
  }
  return Status::Ok();
}

Result<std::vector<int>> CurrentAffinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) {
    return ErrnoStatus(errno, "sched_getaffinity");
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

}  // namespace railyard::launch
