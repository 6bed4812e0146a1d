#include "railyard/validate/host_list.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <map>

#include "railyard/base/files.h"
#include "railyard/base/strings.h"
#include "railyard/topo/hostlist.h"
#include "railyard/topo/load.h"
#include "railyard/validate/registry.h"
#include "railyard/vcluster/vcluster.h"

namespace railyard::validate {
namespace {

constexpr std::string_view kVclusterSpec = "vcluster";

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

// Appends `names` to `list` once each; `where` names the source in errors.
Status AddHosts(HostList& list, const std::vector<std::string>& names, std::string_view where,
                std::map<std::string, std::string, std::less<>>& seen_at) {
  for (const std::string& name : names) {
    RY_RETURN_IF_ERROR(CheckHostName(name).WithContext(where));
    auto [it, inserted] = seen_at.emplace(name, std::string(where));
    if (!inserted) {
      return InvalidArgument("{}: host '{}' is listed twice (first at {})", where, name,
                             it->second);
    }
    list.hosts.push_back(name);
    list.addresses.emplace_back();
  }
  return Status::Ok();
}

Result<HostList> FromVcluster(std::string_view spec, const ResolveHostsOptions& options) {
  std::string prefix = vcluster::DefaultPrefix();
  if (spec.size() > kVclusterSpec.size())
    prefix = std::string(spec.substr(kVclusterSpec.size() + 1));
  if (Status st = vcluster::ValidatePrefix(prefix); !st.ok()) {
    return InvalidArgument("--hosts {}: '{}' is not a virtual cluster prefix ({})", spec, prefix,
                           st.message());
  }
  std::string state_dir =
      options.state_dir.empty() ? vcluster::DefaultStateDir() : options.state_dir;
  // Loading reads the state file only; no command runs.
  vcluster::VirtualCluster vc(nullptr, state_dir);
  RY_ASSIGN_OR_RETURN(vcluster::ClusterState state, vc.Load(prefix));
  HostList list;
  list.source = HostSource::kVcluster;
  list.spec = std::string(spec);
  for (const vcluster::HostPlan& h : state.plan.hosts) {
    list.hosts.push_back(h.name);
    list.addresses.push_back(h.address);
  }
  if (list.hosts.empty()) return InvalidArgument("host list '{}' names no host", spec);
  if (state.topology_file.empty()) {
    list.cluster = FlatCluster(list.hosts);
  } else {
    auto cluster = topo::LoadTopology(state.topology_file);
    if (!cluster.ok()) {
      return cluster.status().WithContext(
          fmt::format("topology file of virtual cluster '{}'", prefix));
    }
    list.cluster = std::move(*cluster);
    list.topology_file = state.topology_file;
  }
  list.vcluster = std::move(state);
  return list;
}

Result<HostList> FromTopology(const topo::Cluster& cluster, std::string_view spec,
                              const std::string& path) {
  HostList list;
  list.source = HostSource::kTopology;
  list.spec = std::string(spec);
  std::map<std::string, std::string, std::less<>> seen;
  for (const topo::Node& n : cluster.nodes) {
    RY_RETURN_IF_ERROR(AddHosts(list, {n.name}, path, seen));
    list.addresses.back() = n.address;
  }
  if (list.hosts.empty()) return InvalidArgument("host list '{}' names no host", spec);
  list.cluster = cluster;
  list.topology_file = path;
  return list;
}

Result<HostList> FromFile(std::string_view spec, const std::string& path) {
  RY_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  if (topo::DetectTopologyFormat(text) != topo::TopologyFormat::kUnknown) {
    RY_ASSIGN_OR_RETURN(topo::Cluster cluster, topo::ParseTopology(text, path));
    return FromTopology(cluster, spec, path);
  }
  RY_ASSIGN_OR_RETURN(std::vector<std::string> names, ParseHostFile(text, path));
  if (names.empty()) return InvalidArgument("host list '{}' names no host", spec);
  HostList list;
  list.source = HostSource::kHostFile;
  list.spec = std::string(spec);
  list.hosts = std::move(names);
  list.addresses.assign(list.hosts.size(), "");
  list.cluster = FlatCluster(list.hosts);
  return list;
}

}  // namespace

std::string_view HostSourceName(HostSource source) {
  switch (source) {
    case HostSource::kVcluster:
      return "virtual cluster";
    case HostSource::kHostFile:
      return "host file";
    case HostSource::kHostlist:
      return "hostlist";
    case HostSource::kTopology:
      return "topology file";
  }
  return "?";
}

Status CheckHostName(std::string_view name) {
  bool ok =
      !name.empty() && name.size() <= 253 && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (ok) return Status::Ok();
  return InvalidArgument(
      "host name '{}': expected letters, digits, '.', '_' and '-', starting with a letter or "
      "digit",
      name);
}

Result<std::vector<std::string>> ParseHostFile(std::string_view text, std::string_view source) {
  HostList list;
  std::map<std::string, std::string, std::less<>> seen;
  std::vector<std::string_view> lines = base::SplitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const int line_no = static_cast<int>(i) + 1;
    std::string_view line = lines[i];
    line = line.substr(0, std::min(line.find('#'), line.size()));
    line = base::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    // An MPI hostfile's "node01 slots=8": the host is the first word.
    std::string_view first = line.substr(0, std::min(line.find_first_of(" \t"), line.size()));
    std::string where = base::Where(source, line_no);
    auto names = topo::ExpandHostlist(first);
    if (!names.ok()) return names.status().WithContext(where);
    RY_RETURN_IF_ERROR(AddHosts(list, *names, where, seen));
  }
  return list.hosts;
}

Result<HostList> ResolveHosts(std::string_view spec, const ResolveHostsOptions& options) {
  spec = base::StripAsciiWhitespace(spec);
  if (spec.empty()) return InvalidArgument("host list '' names no host");
  if (spec == kVclusterSpec || spec.starts_with("vcluster:")) return FromVcluster(spec, options);
  if (spec[0] == '@') {
    if (spec.size() == 1) return InvalidArgument("host list '@': expected @FILE");
    return FromFile(spec, std::string(spec.substr(1)));
  }
  const bool hostlist_syntax = spec.find_first_of("[,") != std::string_view::npos;
  if (!hostlist_syntax && (IsFile(std::string(spec)) || spec.find('/') != spec.npos)) {
    return FromFile(spec, std::string(spec));
  }
  auto names = topo::ExpandHostlist(spec);
  if (!names.ok()) return names.status().WithContext("host list");
  HostList list;
  list.spec = std::string(spec);
  std::map<std::string, std::string, std::less<>> seen;
  RY_RETURN_IF_ERROR(AddHosts(list, *names, fmt::format("host list '{}'", spec), seen));
  list.cluster = FlatCluster(list.hosts);
  return list;
}

Status AttachTopology(HostList& list, const std::string& path) {
  RY_ASSIGN_OR_RETURN(topo::Cluster cluster, topo::LoadTopology(path));
  for (size_t i = 0; i < list.hosts.size(); ++i) {
    int node = cluster.FindNode(list.hosts[i]);
    if (node < 0) {
      std::vector<std::string> names;
      for (const topo::Node& n : cluster.nodes) names.push_back(n.name);
      std::string near = NearestName(list.hosts[i], names);
      return NotFound("host '{}' is not a node of the topology {}{}", list.hosts[i], path,
                      near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
    }
    if (list.addresses[i].empty()) list.addresses[i] = cluster.nodes[node].address;
  }
  list.cluster = std::move(cluster);
  list.topology_file = path;
  return Status::Ok();
}

topo::Cluster FlatCluster(const std::vector<std::string>& hosts) {
  topo::Cluster c;
  c.name = "hosts";
  c.levels = {"leaf"};
  topo::Switch all;
  all.name = "all";
  for (size_t i = 0; i < hosts.size(); ++i) {
    topo::Node n;
    n.name = hosts[i];
    n.leaf = 0;
    c.nodes.push_back(std::move(n));
    all.nodes.push_back(static_cast<int>(i));
  }
  c.switches.push_back(std::move(all));
  return c;
}

}  // namespace railyard::validate
