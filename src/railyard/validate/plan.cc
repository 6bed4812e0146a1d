#include "railyard/validate/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "railyard/base/config.h"
#include "railyard/base/files.h"
#include "railyard/base/units.h"
#include "railyard/topo/hostlist.h"

namespace railyard::validate {
namespace {

using base::FieldContext;

std::string Hint(std::string_view name, const std::vector<std::string>& names) {
  std::string near = NearestName(name, names);
  return near.empty() ? fmt::format("known: {}", fmt::join(names, ", "))
                      : fmt::format("did you mean '{}'?", near);
}

class PlanReader {
 public:
  PlanReader(std::string_view source, const CheckRegistry& registry)
      : source_(source), registry_(registry) {}

  Result<Plan> Read(const YAML::Node& root) {
    FieldContext ctx(source_);
    RY_RETURN_IF_ERROR(base::ExpectMap(root, ctx));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(
        root, {"version", "name", "description", "include", "profiles", "checks"}, ctx));
    RY_ASSIGN_OR_RETURN(int64_t version, base::RequireInt(root, "version", ctx));
    if (version != kPlanVersion) {
      return ctx.Child("version").Error(
          base::YamlGet(root, "version"),
          fmt::format("version {} is not a plan version this railyard reads (expected {})", version,
                      kPlanVersion));
    }
    plan_.source = source_;
    RY_ASSIGN_OR_RETURN(plan_.name, base::RequireString(root, "name", ctx));
    RY_ASSIGN_OR_RETURN(plan_.description, base::OptionalString(root, "description", "", ctx));
    RY_ASSIGN_OR_RETURN(std::string include, base::OptionalString(root, "include", "", ctx));
    if (!include.empty()) {
      if (include != "quick" && include != "full") {
        return ctx.Child("include").Error(
            base::YamlGet(root, "include"),
            fmt::format("unknown built-in plan '{}' (expected quick or full)", include));
      }
      Include(include == "quick" ? Cost::kQuick : Cost::kFull);
    }
    YAML::Node profiles = base::YamlGet(root, "profiles");
    if (profiles.IsDefined() && !profiles.IsNull()) {
      RY_RETURN_IF_ERROR(base::ExpectSequence(profiles, ctx.Child("profiles")));
      for (size_t i = 0; i < profiles.size(); ++i) {
        RY_RETURN_IF_ERROR(ReadProfile(profiles[i], ctx.Child("profiles").Index(i)));
      }
    }
    AddCatchAll();
    YAML::Node checks = base::YamlGet(root, "checks");
    if (checks.IsDefined() && !checks.IsNull()) {
      RY_RETURN_IF_ERROR(base::ExpectSequence(checks, ctx.Child("checks")));
      for (size_t i = 0; i < checks.size(); ++i) {
        RY_RETURN_IF_ERROR(ReadCheck(checks[i], ctx.Child("checks").Index(i)));
      }
    }
    return Finish();
  }

  // Every registered check at or below `cost`, with its defaults.
  void Include(Cost cost) {
    for (const std::string& id : registry_.Ids()) {
      const Check* c = registry_.Find(id);
      if (static_cast<int>(c->info().cost) > static_cast<int>(cost)) continue;
      // The registry has already parsed every default.
      checks_[id] = {.check = c, .settings = *DefaultSettings(c->info())};
    }
  }

  void AddCatchAll() {
    bool has = std::any_of(plan_.profiles.begin(), plan_.profiles.end(),
                           [](const Profile& p) { return p.hosts.empty(); });
    if (has) return;
    plan_.profiles.push_back(Profile{});
    plan_.profile_hosts.emplace_back();
  }

  Result<Plan> Finish() {
    for (auto& [id, c] : checks_) {
      if (c.timeout.count() == 0) c.timeout = c.check->info().timeout;
      plan_.checks.push_back(std::move(c));
    }
    return std::move(plan_);
  }

 private:
  Status ReadProfile(const YAML::Node& node, const FieldContext& ctx) {
    RY_RETURN_IF_ERROR(base::ExpectMap(node, ctx));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(
        node, {"name", "hosts", "nic_rate", "gpus", "rdma", "fabric_provider", "memlock", "mounts"},
        ctx));
    Profile p;
    RY_ASSIGN_OR_RETURN(p.name, base::RequireString(node, "name", ctx));
    for (const Profile& other : plan_.profiles) {
      if (other.name == p.name) {
        return ctx.Child("name").Error(base::YamlGet(node, "name"),
                                       fmt::format("profile '{}' is defined twice", p.name));
      }
      if (other.hosts.empty()) {
        return ctx.Error(node, fmt::format("profile '{}' covers every other host, so it must "
                                           "come last",
                                           other.name));
      }
    }
    RY_ASSIGN_OR_RETURN(p.hosts, base::OptionalString(node, "hosts", "", ctx));
    std::set<std::string, std::less<>> hosts;
    if (!p.hosts.empty()) {
      Result<std::vector<std::string>> names = topo::ExpandHostlist(p.hosts);
      if (!names.ok()) {
        return ctx.Child("hosts").Error(base::YamlGet(node, "hosts"), names.status().message());
      }
      hosts.insert(names->begin(), names->end());
    }
    RY_ASSIGN_OR_RETURN(std::string rate, base::OptionalString(node, "nic_rate", "", ctx));
    if (!rate.empty()) {
      Result<uint64_t> bits = base::ParseRateBits(rate);
      if (!bits.ok()) {
        return ctx.Child("nic_rate")
            .Error(base::YamlGet(node, "nic_rate"), bits.status().message());
      }
      p.nic_rate_bits = *bits;
    }
    RY_ASSIGN_OR_RETURN(int64_t gpus, base::OptionalInt(node, "gpus", -1, ctx));
    if (gpus < -1 || gpus > 4096) {
      return ctx.Child("gpus").Error(base::YamlGet(node, "gpus"),
                                     fmt::format("{} is out of range (expected 0 to 4096)", gpus));
    }
    p.gpus = static_cast<int>(gpus);
    if (base::YamlHas(node, "rdma")) {
      RY_ASSIGN_OR_RETURN(bool rdma, base::RequireBool(node, "rdma", ctx));
      p.rdma = rdma;
    }
    RY_ASSIGN_OR_RETURN(p.fabric_provider, base::OptionalString(node, "fabric_provider", "", ctx));
    RY_ASSIGN_OR_RETURN(std::string memlock, base::OptionalString(node, "memlock", "", ctx));
    if (memlock == "unlimited") {
      p.memlock_bytes = kUnlimited;
    } else if (!memlock.empty()) {
      Result<uint64_t> bytes = base::ParseBytes(memlock);
      if (!bytes.ok()) {
        return ctx.Child("memlock").Error(
            base::YamlGet(node, "memlock"),
            fmt::format("{} (or 'unlimited')", bytes.status().message()));
      }
      p.memlock_bytes = *bytes;
    }
    YAML::Node mounts = base::YamlGet(node, "mounts");
    if (mounts.IsDefined() && !mounts.IsNull()) {
      RY_RETURN_IF_ERROR(base::ExpectSequence(mounts, ctx.Child("mounts")));
      for (size_t i = 0; i < mounts.size(); ++i) {
        FieldContext m = ctx.Child("mounts").Index(i);
        RY_RETURN_IF_ERROR(base::ExpectMap(mounts[i], m));
        RY_RETURN_IF_ERROR(base::RejectUnknownKeys(mounts[i], {"path", "fs"}, m));
        MountExpectation e;
        RY_ASSIGN_OR_RETURN(e.path, base::RequireString(mounts[i], "path", m));
        RY_ASSIGN_OR_RETURN(e.fs_type, base::OptionalString(mounts[i], "fs", "", m));
        if (!e.path.starts_with('/')) {
          return m.Child("path").Error(base::YamlGet(mounts[i], "path"),
                                       fmt::format("'{}' is not an absolute path", e.path));
        }
        p.mounts.push_back(std::move(e));
      }
    }
    plan_.profiles.push_back(std::move(p));
    plan_.profile_hosts.push_back(std::move(hosts));
    return Status::Ok();
  }

  Status ReadCheck(const YAML::Node& node, const FieldContext& ctx) {
    RY_RETURN_IF_ERROR(base::ExpectMap(node, ctx));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(
        node, {"id", "enabled", "profiles", "warn", "fail", "params", "timeout"}, ctx));
    RY_ASSIGN_OR_RETURN(std::string id, base::RequireString(node, "id", ctx));
    Result<const Check*> check = registry_.Lookup(id);
    if (!check.ok()) {
      return ctx.Child("id").Error(base::YamlGet(node, "id"), check.status().message());
    }
    int line = base::YamlLine(node);
    auto [seen, fresh] = lines_.emplace(id, line);
    if (!fresh) {
      return ctx.Child("id").Error(
          base::YamlGet(node, "id"),
          fmt::format("check '{}' is listed twice (first at line {})", id, seen->second));
    }
    RY_ASSIGN_OR_RETURN(bool enabled, base::OptionalBool(node, "enabled", true, ctx));
    if (!enabled) {
      checks_.erase(id);
      return Status::Ok();
    }
    const CheckInfo& info = (*check)->info();
    PlannedCheck pc{.check = *check, .settings = *DefaultSettings(info)};
    for (auto [key, bound] : {std::pair{"warn", &pc.settings.warn}, {"fail", &pc.settings.fail}}) {
      RY_ASSIGN_OR_RETURN(std::string text, base::OptionalString(node, key, "", ctx));
      if (text.empty()) continue;
      if (text == "none") {
        bound->reset();
        continue;
      }
      Result<Threshold> t = ParseThreshold(text, info.unit);
      if (!t.ok()) return ctx.Child(key).Error(base::YamlGet(node, key), t.status().message());
      *bound = *t;
    }
    RY_ASSIGN_OR_RETURN(std::string timeout, base::OptionalString(node, "timeout", "", ctx));
    if (!timeout.empty()) {
      Result<std::chrono::nanoseconds> d = base::ParseDuration(timeout);
      if (!d.ok() || d->count() <= 0) {
        return ctx.Child("timeout").Error(
            base::YamlGet(node, "timeout"),
            d.ok() ? "a timeout must be greater than zero" : d.status().message());
      }
      pc.timeout = std::chrono::ceil<std::chrono::milliseconds>(*d);
    }
    RY_RETURN_IF_ERROR(ReadParams(node, info, pc, ctx));
    RY_RETURN_IF_ERROR(ReadProfileNames(node, pc, ctx));
    checks_[id] = std::move(pc);
    return Status::Ok();
  }

  Status ReadParams(const YAML::Node& node, const CheckInfo& info, PlannedCheck& pc,
                    const FieldContext& ctx) {
    YAML::Node params = base::YamlGet(node, "params");
    if (!params.IsDefined() || params.IsNull()) return Status::Ok();
    FieldContext pctx = ctx.Child("params");
    RY_RETURN_IF_ERROR(base::ExpectMap(params, pctx));
    std::vector<std::string> names;
    for (const Param& p : info.params) names.push_back(p.name);
    for (const auto& kv : params) {
      std::string key = kv.first.Scalar();
      if (!pc.settings.params.contains(key)) {
        return pctx.Error(kv.first, names.empty()
                                        ? fmt::format("check '{}' takes no parameters", info.id)
                                        : fmt::format("unknown parameter '{}' of check '{}' ({})",
                                                      key, info.id, Hint(key, names)));
      }
      if (!kv.second.IsScalar()) return pctx.Child(key).Error(kv.second, "expected a scalar");
      pc.settings.params[key] = kv.second.Scalar();
    }
    return Status::Ok();
  }

  Status ReadProfileNames(const YAML::Node& node, PlannedCheck& pc, const FieldContext& ctx) {
    YAML::Node list = base::YamlGet(node, "profiles");
    if (!list.IsDefined() || list.IsNull()) return Status::Ok();
    FieldContext lctx = ctx.Child("profiles");
    RY_RETURN_IF_ERROR(base::ExpectSequence(list, lctx));
    std::vector<std::string> known;
    for (const Profile& p : plan_.profiles) known.push_back(p.name);
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].IsScalar()) return lctx.Index(i).Error(list[i], "expected a profile name");
      const std::string& name = list[i].Scalar();
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        return lctx.Index(i).Error(
            list[i], fmt::format("unknown profile '{}' ({})", name, Hint(name, known)));
      }
      pc.profiles.push_back(name);
    }
    return Status::Ok();
  }

  std::string source_;
  const CheckRegistry& registry_;
  Plan plan_;
  std::map<std::string, PlannedCheck, std::less<>> checks_;
  std::map<std::string, int, std::less<>> lines_;
};

}  // namespace

bool PlannedCheck::AppliesTo(std::string_view profile) const {
  return profiles.empty() || std::find(profiles.begin(), profiles.end(), profile) != profiles.end();
}

const Profile& Plan::ProfileFor(std::string_view host) const {
  for (size_t i = 0; i < profiles.size(); ++i) {
    if (profile_hosts[i].contains(host)) return profiles[i];
  }
  for (const Profile& p : profiles) {
    if (p.hosts.empty()) return p;
  }
  return profiles.back();  // unreachable for a parsed plan: it always has a catch-all
}

const PlannedCheck* Plan::Find(std::string_view id) const {
  for (const PlannedCheck& c : checks) {
    if (c.check->info().id == id) return &c;
  }
  return nullptr;
}

Result<Plan> ParsePlan(std::string_view text, std::string_view source,
                       const CheckRegistry& registry) {
  RY_ASSIGN_OR_RETURN(YAML::Node root, base::ParseYaml(text, source));
  return PlanReader(source, registry).Read(root);
}

namespace {

// The virtual cluster's hosts are network namespaces of one machine and share its kernel, so
// the kernel's tuning (node.sysctl) and the process limits (node.memlock) describe that
// machine, not a host: they are left to `railyard validate node` on the machine itself.
// `vcluster` starts from full, `vcluster-quick` from quick.
constexpr std::string_view kVclusterPlan = R"(version: 1
name: {0}
description: the {1} plan for the virtual cluster, without the checks of the shared machine's tuning
include: {1}
profiles:
  - {{name: virtual, gpus: 0, rdma: false}}
checks:
  - {{id: node.sysctl, enabled: false}}
  - {{id: node.memlock, enabled: false}}
  - {{id: node.swap, fail: none}}
)";

bool IsBuiltinPlan(std::string_view name) {
  return name == "quick" || name == "full" || name == "vcluster" || name == "vcluster-quick";
}

}  // namespace

Result<Plan> BuiltinPlan(std::string_view name, const CheckRegistry& registry) {
  if (!IsBuiltinPlan(name)) {
    return NotFound("no built-in plan '{}' (built-in: quick, full, vcluster, vcluster-quick)",
                    name);
  }
  if (name.starts_with("vcluster")) {
    return ParsePlan(fmt::format(kVclusterPlan, name, name == "vcluster" ? "full" : "quick"),
                     "built-in", registry);
  }
  std::string text = fmt::format(
      "version: 1\nname: {0}\ndescription: every registered check of cost {1}, with its "
      "defaults\ninclude: {0}\n",
      name, name == "quick" ? "quick" : "quick or full");
  return ParsePlan(text, "built-in", registry);
}

Result<Plan> LoadPlan(const std::string& name_or_path, const CheckRegistry& registry) {
  if (IsBuiltinPlan(name_or_path)) return BuiltinPlan(name_or_path, registry);
  if (name_or_path.find('/') == std::string::npos && !base::PathExists(name_or_path)) {
    // A bare word that is no file was most likely meant as a built-in plan.
    std::string nearest =
        NearestName(name_or_path, {"quick", "full", "vcluster", "vcluster-quick"});
    return NotFound(
        "no built-in plan or file '{}'{} (built-in: quick, full, vcluster, "
        "vcluster-quick)",
        name_or_path, nearest.empty() ? "" : fmt::format(" (did you mean '{}'?)", nearest));
  }
  RY_ASSIGN_OR_RETURN(std::string text, base::ReadFile(name_or_path));
  return ParsePlan(text, name_or_path, registry);
}

}  // namespace railyard::validate
