#include "railyard/vcluster/state.h"

#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

namespace railyard::vcluster {

using nlohmann::json;

uint64_t ClusterState::HostRate(const std::string& host) const {
  auto it = host_rates.find(host);
  return it != host_rates.end() ? it->second : plan.spec.leaf_rate_bits;
}

uint64_t ClusterState::UplinkRate(const std::string& leaf) const {
  auto it = uplink_rates.find(leaf);
  return it != uplink_rates.end() ? it->second : plan.spec.spine_rate_bits;
}

std::string ClusterState::ScratchDir(const std::string& host) const {
  return shared_dir.empty() ? std::string() : shared_dir + "/" + host;
}

std::string_view ScratchFaultName(ScratchFault f) {
  return f == ScratchFault::kReadOnly ? "readonly" : "full";
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
  j["control_address"] = s.control_address;
  j["shared_dir"] = s.shared_dir;
  j["uplink_rates"] = s.uplink_rates;
  j["scratch_faults"] = json::object();
  for (const auto& [host, f] : s.scratch_faults) {
    j["scratch_faults"][host] = std::string(ScratchFaultName(f));
  }
  j["hidden_providers"] = s.hidden_providers;
  if (!s.slurm_conf.empty()) j["slurm_conf"] = s.slurm_conf;
  return j.dump(2) + "\n";
}

namespace {

// Reads one field of the state file, naming it and the expected type when it is missing or
// of another type, so a hand-edited or truncated file says what to fix.
class Fields {
 public:
  Fields(const json& object, std::string_view source, std::string where)
      : object_(object), source_(source), where_(std::move(where)) {}

  Result<std::string> String(const char* name, bool required = true) const {
    RY_ASSIGN_OR_RETURN(const json* v, Find(name, required, "a string", &json::is_string));
    return v ? v->get<std::string>() : std::string();
  }
  Result<int> Int(const char* name) const {
    RY_ASSIGN_OR_RETURN(const json* v, Find(name, true, "an integer", &json::is_number_integer));
    if (v->get<int64_t>() < INT32_MIN || v->get<int64_t>() > INT32_MAX)
      return Bad(name, "an integer", *v);
    return v->get<int>();
  }
  Result<uint64_t> Rate(const char* name) const {
    RY_ASSIGN_OR_RETURN(const json* v, Find(name, true, "a non-negative integer (bits/s)",
                                            &json::is_number_unsigned));
    return v->get<uint64_t>();
  }
  // nullptr when the optional field is absent.
  Result<const json*> Optional(const char* name, const char* expected,
                               bool (json::*is_type)() const noexcept) const {
    return Find(name, false, expected, is_type);
  }
  Status Bad(std::string_view name, std::string_view expected, const json& got) const {
    std::string text = got.dump();
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return InvalidArgument("{}: field '{}{}': expected {}, got {}", source_, where_, name, expected,
                           text);
  }

 private:
  Result<const json*> Find(const char* name, bool required, const char* expected,
                           bool (json::*is_type)() const noexcept) const {
    auto it = object_.find(name);
    if (it == object_.end()) {
      if (!required) return static_cast<const json*>(nullptr);
      return InvalidArgument("{}: field '{}{}' is missing (expected {})", source_, where_, name,
                             expected);
    }
    if (!((*it).*is_type)()) return Bad(name, expected, *it);
    return &*it;
  }

  const json& object_;
  std::string_view source_;
  std::string where_;
};

// An optional object of name: bits/s (host_rates, uplink_rates).
Status ReadRates(const Fields& f, std::string_view source, const char* field, const char* what,
                 std::map<std::string, uint64_t>& out) {
  RY_ASSIGN_OR_RETURN(
      const json* rates,
      f.Optional(field, fmt::format("an object of {}: bits/s", what).c_str(), &json::is_object));
  if (rates == nullptr) return Status::Ok();
  Fields rf(*rates, source, fmt::format("{}.", field));
  for (const auto& [name, rate] : rates->items()) {
    RY_ASSIGN_OR_RETURN(out[name], rf.Rate(name.c_str()));
  }
  return Status::Ok();
}

}  // namespace

Result<ClusterState> StateFromJson(std::string_view text, std::string_view source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgument(
        "{}: not a vcluster state file (not valid JSON); `railyard vcluster down` removes it",
        source);
  }
  if (!j.is_object()) {
    return InvalidArgument("{}: expected a JSON object with 'state_version', got {}", source,
                           j.type_name());
  }
  Fields f(j, source, "");
  auto version = j.find("state_version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
    return InvalidArgument("{}: field 'state_version': expected 1, got {}", source,
                           version == j.end() ? "nothing" : version->dump());
  }
  ClusterSpec spec;
  RY_ASSIGN_OR_RETURN(spec.prefix, f.String("prefix"));
  RY_ASSIGN_OR_RETURN(std::string mode, f.String("mode"));
  if (mode != "netns" && mode != "loopback") {
    return InvalidArgument("{}: field 'mode': expected netns or loopback, got '{}'", source, mode);
  }
  spec.mode = mode == "netns" ? Mode::kNetns : Mode::kLoopback;
  RY_ASSIGN_OR_RETURN(spec.hosts, f.Int("hosts"));
  RY_ASSIGN_OR_RETURN(spec.leaves, f.Int("leaves"));
  RY_ASSIGN_OR_RETURN(spec.leaf_rate_bits, f.Rate("leaf_rate_bits"));
  RY_ASSIGN_OR_RETURN(spec.spine_rate_bits, f.Rate("spine_rate_bits"));
  Status valid = ValidateSpec(spec);
  if (!valid.ok()) return valid.WithContext(source);
  ClusterState s;
  s.plan = MakePlan(spec);
  RY_ASSIGN_OR_RETURN(s.created, f.String("created", /*required=*/false));
  RY_ASSIGN_OR_RETURN(s.topology_file, f.String("topology_file", /*required=*/false));
  RY_ASSIGN_OR_RETURN(s.control_address, f.String("control_address", /*required=*/false));
  RY_ASSIGN_OR_RETURN(s.shared_dir, f.String("shared_dir", /*required=*/false));
  RY_ASSIGN_OR_RETURN(s.slurm_conf, f.String("slurm_conf", /*required=*/false));
  RY_RETURN_IF_ERROR(ReadRates(f, source, "uplink_rates", "leaf", s.uplink_rates));
  RY_ASSIGN_OR_RETURN(const json* scratch,
                      f.Optional("scratch_faults", "an object of host: \"readonly\" or \"full\"",
                                 &json::is_object));
  if (scratch) {
    Fields sf(*scratch, source, "scratch_faults.");
    for (const auto& [host, v] : scratch->items()) {
      RY_ASSIGN_OR_RETURN(std::string kind, sf.String(host.c_str()));
      if (kind != "readonly" && kind != "full") return sf.Bad(host, "readonly or full", v);
      s.scratch_faults[host] = kind == "readonly" ? ScratchFault::kReadOnly : ScratchFault::kFull;
    }
  }
  RY_ASSIGN_OR_RETURN(
      const json* hidden,
      f.Optional("hidden_providers", "an object of host: [provider names]", &json::is_object));
  if (hidden) {
    for (const auto& [host, list] : hidden->items()) {
      if (!list.is_array()) return f.Bad("hidden_providers." + host, "a list of names", list);
      for (size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_string()) {
          return f.Bad(fmt::format("hidden_providers.{}[{}]", host, i), "a provider name", list[i]);
        }
        s.hidden_providers[host].insert(list[i].get<std::string>());
      }
    }
  }

  RY_RETURN_IF_ERROR(ReadRates(f, source, "host_rates", "host", s.host_rates));
  RY_ASSIGN_OR_RETURN(const json* cut, f.Optional("cut", "a list of host names", &json::is_array));
  if (cut) {
    for (size_t i = 0; i < cut->size(); ++i) {
      if (!(*cut)[i].is_string()) {
        return f.Bad(fmt::format("cut[{}]", i), "a host name", (*cut)[i]);
      }
      s.cut.insert((*cut)[i].get<std::string>());
    }
  }
  RY_ASSIGN_OR_RETURN(const json* paths,
                      f.Optional("paths", "a list of {a, b, rate_bits}", &json::is_array));
  if (paths) {
    for (size_t i = 0; i < paths->size(); ++i) {
      const json& p = (*paths)[i];
      if (!p.is_object()) return f.Bad(fmt::format("paths[{}]", i), "an object", p);
      Fields pf(p, source, fmt::format("paths[{}].", i));
      PathDegradation d;
      RY_ASSIGN_OR_RETURN(d.a, pf.String("a"));
      RY_ASSIGN_OR_RETURN(d.b, pf.String("b"));
      RY_ASSIGN_OR_RETURN(d.rate_bits, pf.Rate("rate_bits"));
      s.paths.push_back(std::move(d));
    }
  }
  return s;
}

std::string DefaultPrefix() {
  if (const char* prefix = std::getenv(kPrefixEnv); prefix != nullptr && *prefix != '\0') {
    return prefix;
  }
  return ClusterSpec{}.prefix;
}

std::string DefaultStateDir() {
  if (const char* dir = std::getenv(kStateDirEnv); dir != nullptr && *dir != '\0') {
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

std::string SharedDirPath(const std::string& state_dir, std::string_view prefix) {
  return fmt::format("{}/{}-shared", state_dir, prefix);
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
