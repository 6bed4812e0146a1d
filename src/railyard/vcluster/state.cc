#include "railyard/vcluster/state.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace railyard::vcluster {

using nlohmann::json;

uint64_t ClusterState::HostRate(const std::string& host) const {
  auto it = host_rates.find(host);
  return it != host_rates.end() ? it->second : plan.spec.leaf_rate_bits;
}

std::string StateToJson(const ClusterState& s) {
  json j;
  j["state_version"] = 1;
  j["prefix"] = s.spec().prefix;
  j["mode"] = std::string(ModeName(s.spec().mode));
  j["hosts"] = s.spec().hosts;
  j["leaves"] = s.spec().leaves;
  j["leaf_rate_bits"] = s.spec().leaf_rate_bits;
  j["spine_rate_bits"] = s.spec().spine_rate_bits;
  j["created"] = s.created;
  j["host_rates"] = s.host_rates;
  j["cut"] = s.cut;
  j["paths"] = json::array();
  for (const auto& p : s.paths) {
    j["paths"].push_back({{"a", p.a}, {"b", p.b}, {"rate_bits", p.rate_bits}});
  }
  j["topology_file"] = s.topology_file;
  return j.dump(2) + "\n";
}

Result<ClusterState> StateFromJson(std::string_view text, std::string_view source) {
  try {
    json j = json::parse(text);
    if (j.value("state_version", 0) != 1) {
      return InvalidArgument("{}: field 'state_version': expected 1, got {}", source,
                             j.value("state_version", json()).dump());
    }
    ClusterSpec spec;
    spec.prefix = j.at("prefix").get<std::string>();
    std::string mode = j.at("mode").get<std::string>();
    if (mode != "netns" && mode != "loopback") {
      return InvalidArgument("{}: field 'mode': expected netns or loopback, got '{}'", source,
                             mode);
    }
    spec.mode = mode == "netns" ? Mode::kNetns : Mode::kLoopback;
    spec.hosts = j.at("hosts").get<int>();
    spec.leaves = j.at("leaves").get<int>();
    spec.leaf_rate_bits = j.at("leaf_rate_bits").get<uint64_t>();
    spec.spine_rate_bits = j.at("spine_rate_bits").get<uint64_t>();
    Status valid = ValidateSpec(spec);
    if (!valid.ok()) return valid.WithContext(source);
    ClusterState s;
    s.plan = MakePlan(spec);
    s.created = j.value("created", "");
    s.host_rates = j.value("host_rates", std::map<std::string, uint64_t>{});
    s.cut = j.value("cut", std::set<std::string>{});
    for (const auto& p : j.value("paths", json::array())) {
      s.paths.push_back({p.at("a").get<std::string>(), p.at("b").get<std::string>(),
                         p.at("rate_bits").get<uint64_t>()});
    }
    s.topology_file = j.value("topology_file", "");
    return s;
  } catch (const json::exception& e) {
    return InvalidArgument("{}: malformed vcluster state file: {}", source, e.what());
  }
}

std::string DefaultStateDir() {
  if (const char* dir = std::getenv("RAILYARD_STATE_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  if (::geteuid() == 0) return "/run/railyard";
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg != '\0') {
    return fmt::format("{}/railyard", xdg);
  }
  return fmt::format("/tmp/railyard-{}", ::geteuid());
}

std::string StateFilePath(const std::string& state_dir, std::string_view prefix) {
  return fmt::format("{}/vcluster-{}.json", state_dir, prefix);
}

std::string TopologyFilePath(const std::string& state_dir, std::string_view prefix) {
  return fmt::format("{}/vcluster-{}-topology.yaml", state_dir, prefix);
}

std::string NowIso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace railyard::vcluster
