// NUMA nodes from sysfs: node*/cpulist, else one node holding cpu/online.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include "railyard/base/files.h"
#include "railyard/topo/discover/sources.h"
#include "railyard/topo/discover/sysfs.h"

namespace railyard::topo::internal {

std::vector<NumaNode> NumaFromSysfs(const std::string& root, std::vector<std::string>& notes,
                                    std::string& source) {
  std::vector<NumaNode> numa;
  const std::string dir = root + "/devices/system/node";
  for (const std::string& name : ListDir(dir)) {
    std::string_view id_s = std::string_view(name).substr(std::min<size_t>(4, name.size()));
    int id = -1;
    auto [end, ec] = std::from_chars(id_s.data(), id_s.data() + id_s.size(), id);
    if (name.rfind("node", 0) != 0 || id_s.empty() || ec != std::errc() ||
        end != id_s.data() + id_s.size()) {
      continue;
    }
    const std::string path = dir + "/" + name + "/cpulist";
    std::optional<std::string> text = base::ReadTrimmedFile(path);
    if (!text) {
      notes.push_back(fmt::format("{}: unreadable, NUMA node {} left out", path, id));
      continue;
    }
    Result<std::vector<int>> cpus = ReadCpuList(*text, path);
    if (!cpus.ok()) {
      notes.push_back(cpus.status().message() + fmt::format(": NUMA node {} left out", id));
      continue;
    }
    if (cpus->empty()) {
      notes.push_back(fmt::format("NUMA node {} has no CPUs (memory only): left out", id));
      continue;
    }
    numa.push_back(NumaNode{id, std::move(cpus).value()});
  }
  std::sort(numa.begin(), numa.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  source = "sysfs";
  if (!numa.empty()) return numa;

  // Kernels built without NUMA have no node directories: the machine is one node.
  const std::string online = root + "/devices/system/cpu/online";
  std::optional<std::string> text = base::ReadTrimmedFile(online);
  Result<std::vector<int>> cpus =
      text ? ReadCpuList(*text, online)
           : Result<std::vector<int>>(NotFound("{}: unreadable", online));
  if (cpus.ok() && !cpus->empty()) {
    notes.push_back(fmt::format("no NUMA nodes in {}: one node 0 with the online CPUs", dir));
    source = "sysfs cpu/online (no NUMA information)";
    numa.push_back(NumaNode{0, std::move(cpus).value()});
  } else {
    notes.push_back(fmt::format("no NUMA nodes in {} and no CPU list in {}", dir, online));
    source = "none";
  }
  return numa;
}

}  // namespace railyard::topo::internal
