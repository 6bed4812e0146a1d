#include "railyard/validate/registry.h"

#include <fmt/format.h>

#include "railyard/base/config.h"

namespace railyard::validate {

Status CheckRegistry::Register(std::unique_ptr<Check> check) {
  const CheckInfo& info = check->info();
  std::string prefix = fmt::format("{}.", CategoryName(info.category));
  if (!info.id.starts_with(prefix) || info.id.size() == prefix.size()) {
    return InvalidArgument("check id '{}' must be '{}<name>' (its category is {})", info.id, prefix,
                           CategoryName(info.category));
  }
  if (checks_.contains(info.id)) return AlreadyExists("check '{}' is registered twice", info.id);
  Result<CheckSettings> defaults = DefaultSettings(info);
  if (!defaults.ok()) return defaults.status().WithContext(fmt::format("check '{}'", info.id));
  checks_.emplace(info.id, std::move(check));
  return Status::Ok();
}

const Check* CheckRegistry::Find(std::string_view id) const {
  auto it = checks_.find(id);
  return it == checks_.end() ? nullptr : it->second.get();
}

Result<const Check*> CheckRegistry::Lookup(std::string_view id) const {
  if (const Check* c = Find(id)) return c;
  std::string near = Nearest(id);
  if (near.empty()) return NotFound("unknown check '{}' (see --list-checks)", id);
  return NotFound("unknown check '{}' (did you mean '{}'?)", id, near);
}

std::string CheckRegistry::Nearest(std::string_view id) const { return NearestName(id, Ids()); }

std::string NearestName(std::string_view name, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = name.size() / 3 + 1;
  for (const std::string& candidate : names) {
    size_t d = base::EditDistance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::vector<std::string> CheckRegistry::Ids() const {
  std::vector<std::string> ids;
  for (const auto& [name, check] : checks_) ids.push_back(name);
  return ids;
}

}  // namespace railyard::validate
